"""The vision tower's grid-derived inputs, computed once per distinct list of grids.

``vision_inputs`` hands the tower what it would otherwise derive from ``image_grid_thw`` on the
device in every forward (rotary positions, position-embedding interpolation taps, sequence
boundaries): transformers builds the rotary positions in a Python loop of small device ops per
image (about 2,000 launches and a device wait for a batch of eight 32-frame requests), and the
host then sat in that loop while the device ran dry. They are computed on the host by
transformers' own functions and kept on the device, per distinct list of grids (every batch of
32-frame requests usually has the same).

A new list is assembled on the device from each distinct image shape's inputs, computed once per
shape: an image's positions and taps depend on its own (t, h, w) only. Computing a whole list
on the host cost about a CPU-second for a sweep call's 2,000 frames (2.6 million patches, where
the lists of fps ladders on different videos rarely repeat), a second the device sat idle.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any

import torch

from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.runtime.transfer import to_device

INPUT_CACHE = 16  # distinct grid lists kept on the device
SHAPE_CACHE = 256  # distinct image shapes (t, h, w) whose inputs are kept on the device


def vision_inputs(model: Any, grid: torch.Tensor) -> dict[str, Any]:
    """Keyword arguments for ``model`` (a Qwen3-VL model) that carry the vision tower's
    grid-derived inputs for ``grid`` (``image_grid_thw``, on the CPU), precomputed, and the grid
    itself on the CPU (transformers then reads image sizes without waiting for the device);
    nothing where the install step found transformers' functions for them missing."""
    state = state_of(model)
    if not state.vision_inputs_ok:
        return {}
    from transformers.vision_utils import get_vision_cu_seqlens

    visual = model.model.visual
    device = next(visual.parameters()).device
    cache = state.vision_inputs
    key = tuple(int(x) for x in grid.reshape(-1).tolist())
    hit = cache.get(key)
    if hit is None:
        # A request's frames share a shape: a call's thousands of images are a few runs.
        shapes = [(key[i], key[i + 1], key[i + 2]) for i in range(0, len(key), 3)]
        runs = [(_shape_inputs(state.vision_shapes, visual, shape, device), len(list(same)))
                for shape, same in itertools.groupby(shapes)]
        cu = get_vision_cu_seqlens(grid)
        hit = {
            name: _joined([(parts[j], n) for parts, n in runs])
            for j, name in enumerate(("image_position_ids", "image_interp_indices", "image_interp_weights"))
        }
        hit["image_cu_seqlens"] = to_device(cu, device)
        hit["lengths"] = (cu[1:] - cu[:-1]).tolist()
        cache[key] = hit
        while len(cache) > INPUT_CACHE:
            cache.popitem(last=False)
    cache.move_to_end(key)
    state.vision_lengths[:] = [hit["image_cu_seqlens"], hit["lengths"]]  # the grouped attention's, known already
    out = {k: v for k, v in hit.items() if k != "lengths"}
    out["image_grid_thw"] = grid
    return out


def _shape_inputs(memo: OrderedDict[tuple[int, int, int], tuple[torch.Tensor, ...]], visual: Any,
                  shape: tuple[int, int, int], device: torch.device) -> tuple[torch.Tensor, ...]:
    """(position ids, interpolation indices, interpolation weights) of one image of ``shape`` on
    ``device``, by transformers' functions; kept in ``memo`` (least recently used dropped)."""
    hit = memo.get(shape)
    if hit is None:
        from transformers.vision_utils import get_vision_interpolation_indices_and_weights, get_vision_position_ids

        one = torch.tensor([shape])
        indices, weights = get_vision_interpolation_indices_and_weights(
            one, num_grid_per_side=visual.num_grid_per_side, mode=visual.interpolation_mode,
            align_corners=visual.interpolation_align_corners, spatial_merge_size=visual.config.spatial_merge_size,
        )
        positions = get_vision_position_ids(one, visual.spatial_merge_size)
        hit = memo[shape] = (to_device(positions, device), to_device(indices, device), to_device(weights, device))
        while len(memo) > SHAPE_CACHE:
            memo.popitem(last=False)
    memo.move_to_end(shape)
    return hit


def _joined(runs: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    """Each (inputs, n) repeated n times, concatenated in order."""
    pieces = [part if n == 1 else part.expand(n, *part.shape).flatten(0, 1) for part, n in runs]
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces)
