"""The padded tensors of a batch of requests (``schedule.batches`` decides which requests share it).

Rows carry explicit position ids: row 0 the text positions,
rows 1-3 Qwen3-VL's M-RoPE (time, height, width) positions, both counted over real tokens only,
so a request gets the same positions, and therefore the same scores, alone or in any batch.

Generation left-pads (every row's next token goes at the end). Scoring right-pads: under plain
causal attention a real token never sees the padding after it, so the forward needs no mask at
all and SDPA runs a causal kernel (cuDNN's on the H200, which skips the masked half) instead of
a masked one over the full square; the scored position is then each row's own last real token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchcheck.engines.hf.forward.pixels import PixelSpec, patchify_staged, stage_frames
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.model.vision_inputs import vision_inputs
from benchcheck.engines.hf.runtime.transfer import to_device


@dataclass(slots=True)
class Batch:
    """Padded model inputs of several requests (left padding, or right padding for scoring)."""

    input_ids: torch.Tensor  # (B, L)
    attention_mask: torch.Tensor  # (B, L)
    mm_token_type_ids: torch.Tensor  # (B, L)
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    lengths: list[int]
    host: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]  # ids, mask, types, grids on the CPU
    # (4, B, L) on the CPU: text positions, then M-RoPE (t, h, w) (``host_positions``).
    positions: torch.Tensor
    right: bool = False  # right-padded: causal attention alone keeps padding out of real tokens

    def model_kwargs(self, model: Any = None) -> dict[str, Any]:
        """The model's keyword arguments; with ``model``, the vision tower's grid-derived inputs
        precomputed for it too (``model.vision_inputs.vision_inputs``)."""
        kw: dict[str, Any] = {
            "input_ids": self.input_ids,
            # Right padding: no mask, so transformers hands SDPA ``is_causal`` (a causal kernel).
            "attention_mask": None if self.right else self.attention_mask,
            "mm_token_type_ids": self.mm_token_type_ids,
        }
        if self.pixel_values is not None:
            kw["pixel_values"] = self.pixel_values
            kw["image_grid_thw"] = self.image_grid_thw
            if model is not None and self.host[3] is not None:
                kw.update(vision_inputs(model, self.host[3]))
        return kw


def padded_width(longest: int) -> int:
    """The width of a right-padded batch: the longest row rounded up to a multiple of 16 tokens
    (64 from 1,024 on). cuDNN's attention, SDPA's choice on the H200, builds an execution graph for
    every new shape (milliseconds of host time each); rounded widths repeat from batch to batch,
    for at most 1.6 % more tokens on long rows.

    >>> padded_width(254), padded_width(3787), padded_width(16)
    (256, 3840, 16)
    """
    step = 64 if longest >= 1024 else 16
    return -(-longest // step) * step


@dataclass(frozen=True, slots=True)
class HostBatch:
    """A batch's inputs on the host, laid out as ``collate`` pads them (``stage``), the frames
    already in the buffers their copies leave from: what ``upload`` needs, built without the
    device, so a batch can be staged while the device still runs the one before."""

    ids: torch.Tensor  # (B, L) int64
    mask: torch.Tensor
    types: torch.Tensor
    grid: torch.Tensor | None  # (images, 3) int64
    frames: tuple[torch.Tensor, ...]  # ``pixels.stage_frames``: (N, H, W, C) uint8, page-locked on CUDA
    lengths: list[int]
    positions: torch.Tensor  # (4, B, L) (``host_positions``)
    right: bool


def stage(items: Sequence[EncodedPrompt], device: torch.device, pad_id: int, right: bool = False) -> HostBatch:
    """``items`` padded on the host (on the left, or on the right with ``right``, to
    ``padded_width``), frames staged for ``device``: ``collate``'s host half."""
    lengths = [it.n_tokens for it in items]
    width = padded_width(max(lengths)) if right else max(lengths)
    ids = np.full((len(items), width), pad_id, np.int64)
    mask = np.zeros((len(items), width), np.int64)
    types = np.zeros((len(items), width), np.int64)
    for r, it in enumerate(items):
        cols = slice(0, it.n_tokens) if right else slice(width - it.n_tokens, width)
        ids[r, cols] = it.input_ids
        mask[r, cols] = 1
        types[r, cols] = it.mm_token_type_ids
    # Images in row order: the model fills image placeholders row by row, left to right.
    frames = [f for it in items for f in it.frames]
    grids = [it.image_grid_thw for it in items if it.image_grid_thw is not None]
    return HostBatch(
        torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types),
        torch.from_numpy(np.concatenate(grids)) if grids else None,
        tuple(stage_frames(frames, device)) if frames else (),
        lengths,
        torch.from_numpy(host_positions(items, width, right, images=bool(grids))),
        right,
    )


def upload(host: HostBatch, pixels: PixelSpec, dtype: torch.dtype) -> Batch:
    """The staged batch on the device of ``pixels``, pixel values in ``dtype``: ``collate``'s
    device half (copies queued without waiting, and the pixel values' kernels)."""
    device = pixels.table.device
    return Batch(
        to_device(host.ids, device),
        to_device(host.mask, device),
        to_device(host.types, device),
        patchify_staged(host.frames, pixels).to(dtype) if host.frames else None,
        to_device(host.grid, device) if host.grid is not None else None,
        host.lengths,
        (host.ids, host.mask, host.types, host.grid),
        host.positions,
        host.right,
    )


def collate(items: Sequence[EncodedPrompt], pad_id: int, pixels: PixelSpec, dtype: torch.dtype,
            right: bool = False) -> Batch:
    """Pad ``items`` into one batch on the device of ``pixels`` (on the left, or on the right
    with ``right``, to ``padded_width``); pixel values in ``dtype``: ``upload`` of ``stage``."""
    return upload(stage(items, pixels.table.device, pad_id, right), pixels, dtype)


def host_positions(items: Sequence[EncodedPrompt], width: int, right: bool, images: bool) -> np.ndarray:
    """(4, B, width) positions of ``items`` padded as ``collate`` pads them: row 0 the text
    positions, rows 1-3 M-RoPE (t, h, w), each item's own (``EncodedPrompt.mrope``, computed
    while encoding). Padding gets 0, except the text positions of right padding, which go on
    counting (0, 1, ..., width-1 along every row): a position that falls back would make
    transformers read the row as several packed sequences and build a block mask, losing the
    mask-free causal kernel. A batch without images has M-RoPE rows equal to the text row."""
    pos = np.zeros((4, len(items), width), np.int64)
    if right:
        pos[0] = np.arange(width)
    for r, it in enumerate(items):
        n = it.n_tokens
        cols = slice(0, n) if right else slice(width - n, width)
        if not right:
            pos[0, r, cols] = np.arange(n)
        if images:  # a text-only prompt's M-RoPE positions are its token indices
            pos[1:, r, cols] = np.arange(n) if it.mrope is None else it.mrope
    if not images:
        pos[1:] = pos[0]
    return pos


def last_real(batch: Batch, states: torch.Tensor) -> torch.Tensor:
    """(B, hidden) ``states`` (B, L, hidden) at each row's last real token of the right-padded
    ``batch``: the position whose logits score or continue the row."""
    dev = states.device
    last = to_device(torch.tensor(batch.lengths, dtype=torch.long) - 1, dev)
    return states[to_device(torch.arange(len(batch.lengths)), dev), last]


def position_ids(batch: Batch) -> torch.Tensor:
    """(4, B, L) positions of ``batch`` on its device (``Batch.positions``), a tensor of its own."""
    dev = batch.input_ids.device
    return batch.positions.clone() if dev.type == "cpu" else to_device(batch.positions, dev)
