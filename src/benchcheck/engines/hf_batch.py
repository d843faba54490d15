"""Batching for the ``hf`` engine: which requests share a forward, and their padded tensors.

Requests are sorted by length and cut into batches bounded by a request count and a padded
token count, so padding stays small. Rows carry explicit position ids: row 0 the text positions,
rows 1-3 Qwen3-VL's M-RoPE (time, height, width) positions, both counted over real tokens only,
so a request gets the same positions, and therefore the same scores, alone or in any batch.

Generation left-pads (every row's next token goes at the end). Scoring right-pads: under plain
causal attention a real token never sees the padding after it, so the forward needs no mask at
all and SDPA runs a causal kernel (cuDNN's on the H200, which skips the masked half) instead of
a masked one over the full square; the scored position is then each row's own last real token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from benchcheck.engines.hf_inputs import EncodedPrompt
from benchcheck.engines.hf_pixels import PixelSpec, patchify
from benchcheck.engines.hf_transfer import to_device
from benchcheck.engines.hf_vision import vision_inputs

T = TypeVar("T")


def plan_batches(lengths: Sequence[int], max_batch_size: int, max_batch_tokens: int) -> list[list[int]]:
    """Indices grouped into batches: sorted by length, each batch at most ``max_batch_size``
    requests and ``max_batch_tokens`` padded tokens (a longer request goes alone).

    >>> plan_batches([5, 1, 3, 2], max_batch_size=2, max_batch_tokens=100)
    [[1, 3], [2, 0]]
    >>> plan_batches([10, 10, 10], max_batch_size=8, max_batch_tokens=20)
    [[0, 1], [2]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        # Sorted ascending, so the newcomer sets the padded length of the batch.
        if cur and (len(cur) >= max_batch_size or lengths[i] * (len(cur) + 1) > max_batch_tokens):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def balanced(plan: Callable[[int], list[list[T]]], cap: int) -> list[list[T]]:
    """The batches ``plan(cap)`` makes (``plan``: requests at most per batch -> batches), made
    as even as the same number of batches allows: ``plan`` at the smallest cap that needs no
    more batches. A chunk of 270 requests that 256 a batch would cut
    into 256 + 14 becomes 135 + 135: a small batch ahead of a large one left the device idle
    while the host built the large one (H200 timeline, one-frame requests: ~80 ms a chunk).

    >>> balanced(lambda c: plan_batches([1] * 5, c, 100), 4)
    [[0, 1, 2], [3, 4]]
    """
    best = plan(cap)
    if len(best) < 2:
        return best
    # From 1: a unit larger than the cap (a family of many members) goes alone, so total/count
    # is no lower bound, and no bound may pass the cap itself.
    lo, hi = 1, cap
    while lo < hi:  # greedy planning needs no fewer batches for a smaller cap: bisect
        mid = (lo + hi) // 2
        if len(plan(mid)) <= len(best):
            hi = mid
        else:
            lo = mid + 1
    return plan(lo)


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
        precomputed for it too (``hf_vision.vision_inputs``)."""
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


def encoding_blocks(with_images: Sequence[bool], text_block: int) -> list[list[int]]:
    """Consecutive request indices in the blocks their encoding runs in: runs of text-only
    requests up to ``text_block`` together (one tokenizer call), a request with images alone
    (its decoding dominates, and its batch should not wait for the others').

    >>> encoding_blocks([False, False, False, True, False], text_block=2)
    [[0, 1], [2], [3], [4]]
    """
    blocks: list[list[int]] = []
    for i, images in enumerate(with_images):
        if images or not blocks or len(blocks[-1]) >= text_block or with_images[blocks[-1][0]]:
            blocks.append([i])
        else:
            blocks[-1].append(i)
    return blocks


def chunk_spans(n: int, first: int, growth: int, window: Callable[[int], int]) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` spans covering ``n`` requests in arrival order: the first ``first`` long, each
    next ``growth`` times the one before, at most ``window(lo)`` (the sort window where it
    starts). A remainder shorter than half a span joins that span instead of following it (the
    last span can so reach 1.5 times its planned size).

    >>> list(chunk_spans(100, 8, 2, lambda lo: 32))
    [(0, 8), (8, 24), (24, 56), (56, 100)]
    """
    lo, size = 0, max(1, first)
    while lo < n:
        hi = lo + size
        if n - hi < size // 2:
            hi = n
        yield lo, hi
        lo = hi
        size = max(1, min(growth * size, window(lo)))


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


def collate(items: Sequence[EncodedPrompt], pad_id: int, pixels: PixelSpec, dtype: torch.dtype,
            right: bool = False) -> Batch:
    """Pad ``items`` into one batch on the device of ``pixels`` (on the left, or on the right
    with ``right``, to ``padded_width``); pixel values in ``dtype``."""
    device = pixels.table.device
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
    pixel_values = patchify(frames, pixels).to(dtype) if frames else None
    host_grid = torch.from_numpy(np.concatenate(grids)) if grids else None
    host = (torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types), host_grid)
    positions = torch.from_numpy(host_positions(items, width, right, images=bool(grids)))
    return Batch(
        to_device(host[0], device),
        to_device(host[1], device),
        to_device(host[2], device),
        pixel_values,
        to_device(host_grid, device) if host_grid is not None else None,
        lengths,
        host,
        positions,
        right,
    )


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


def position_ids(batch: Batch) -> torch.Tensor:
    """(4, B, L) positions of ``batch`` on its device (``Batch.positions``), a tensor of its own."""
    dev = batch.input_ids.device
    return batch.positions.clone() if dev.type == "cpu" else to_device(batch.positions, dev)
