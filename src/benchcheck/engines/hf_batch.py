"""Batching for the ``hf`` engine: which requests share a forward, and their padded tensors.

Requests are sorted by length and cut into batches bounded by a request count and a padded
token count, so padding stays small. Rows are left-padded (the scored position is the last one
of every row) and carry explicit position ids: row 0 the text positions, rows 1-3 Qwen3-VL's
M-RoPE (time, height, width) positions, both counted over real tokens only, so a request gets
the same positions, and therefore the same scores, alone or in any batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchcheck.engines.hf_inputs import EncodedPrompt
from benchcheck.engines.hf_pixels import PixelSpec, patchify


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


@dataclass(slots=True)
class Batch:
    """Padded model inputs of several requests (left padding)."""

    input_ids: torch.Tensor  # (B, L)
    attention_mask: torch.Tensor  # (B, L)
    mm_token_type_ids: torch.Tensor  # (B, L)
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    lengths: list[int]
    host: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]  # ids, mask, types, grids on the CPU

    def model_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "mm_token_type_ids": self.mm_token_type_ids,
        }
        if self.pixel_values is not None:
            kw["pixel_values"] = self.pixel_values
            kw["image_grid_thw"] = self.image_grid_thw
        return kw


def collate(items: Sequence[EncodedPrompt], pad_id: int, pixels: PixelSpec, dtype: torch.dtype) -> Batch:
    """Left-pad ``items`` into one batch on the device of ``pixels``; pixel values in ``dtype``."""
    device = pixels.table.device
    lengths = [it.n_tokens for it in items]
    width = max(lengths)
    ids = np.full((len(items), width), pad_id, np.int64)
    mask = np.zeros((len(items), width), np.int64)
    types = np.zeros((len(items), width), np.int64)
    for r, it in enumerate(items):
        ids[r, width - it.n_tokens :] = it.input_ids
        mask[r, width - it.n_tokens :] = 1
        types[r, width - it.n_tokens :] = it.mm_token_type_ids
    # Images in row order: the model fills image placeholders row by row, left to right.
    frames = [f for it in items for f in it.frames]
    grids = [it.image_grid_thw for it in items if it.image_grid_thw is not None]
    pixel_values = patchify(frames, pixels).to(dtype) if frames else None
    host_grid = torch.from_numpy(np.concatenate(grids)) if grids else None
    host = (torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types), host_grid)
    return Batch(
        host[0].to(device),
        host[1].to(device),
        host[2].to(device),
        pixel_values,
        host_grid.to(device) if host_grid is not None else None,
        lengths,
        host,
    )


def position_ids(model: Any, batch: Batch) -> torch.Tensor:
    """(4, B, L) positions: text positions, then M-RoPE (t, h, w); padding gets 0.

    Computed from the host copies: transformers' ``get_rope_index`` reads a few numbers per image
    with ``.item()``, and on device tensors each read would wait for the device to finish all
    queued work (thousands of waits per batch of 32-frame requests)."""
    ids, mask, types, grid = batch.host
    text = (mask.cumsum(-1) - 1).clamp(min=0) * mask
    if grid is None:
        mrope = text.unsqueeze(0).expand(3, -1, -1)
    else:
        mrope, _ = model.model.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=grid, attention_mask=mask)
    pos = torch.cat([text.unsqueeze(0), mrope.to(text.dtype)], dim=0)
    return pos.to(batch.input_ids.device, non_blocking=True)
