"""The vision tower's grid-derived inputs, computed once per distinct list of grids.

``vision_inputs`` hands the tower what it would otherwise derive from ``image_grid_thw`` on the
device in every forward (rotary positions, position-embedding interpolation taps, sequence
boundaries): transformers builds the rotary positions in a Python loop of small device ops per
image (about 2,000 launches and a device wait for a batch of eight 32-frame requests), and the
host then sat in that loop while the device ran dry. They are computed once on the host by
transformers' own functions, per distinct list of grids (every batch of 32-frame requests
usually has the same), and kept on the device.
"""

from __future__ import annotations

from typing import Any

import torch

from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.runtime.transfer import to_device

INPUT_CACHE = 16  # distinct grid lists kept on the device


def vision_inputs(model: Any, grid: torch.Tensor) -> dict[str, Any]:
    """Keyword arguments for ``model`` (a Qwen3-VL model) that carry the vision tower's
    grid-derived inputs for ``grid`` (``image_grid_thw``, on the CPU), precomputed, and the grid
    itself on the CPU (transformers then reads image sizes without waiting for the device);
    nothing where the install step found transformers' functions for them missing."""
    state = state_of(model)
    if not state.vision_inputs_ok:
        return {}
    from transformers.vision_utils import (
        get_vision_cu_seqlens,
        get_vision_interpolation_indices_and_weights,
        get_vision_position_ids,
    )

    visual = model.model.visual
    device = next(visual.parameters()).device
    cache = state.vision_inputs
    key = tuple(int(x) for x in grid.reshape(-1).tolist())
    hit = cache.get(key)
    if hit is None:
        indices, weights = get_vision_interpolation_indices_and_weights(
            grid, num_grid_per_side=visual.num_grid_per_side, mode=visual.interpolation_mode,
            align_corners=visual.interpolation_align_corners, spatial_merge_size=visual.config.spatial_merge_size,
        )
        cu = get_vision_cu_seqlens(grid)
        hit = {
            "image_position_ids": to_device(get_vision_position_ids(grid, visual.spatial_merge_size), device),
            "image_interp_indices": to_device(indices, device),
            "image_interp_weights": to_device(weights, device),
            "image_cu_seqlens": to_device(cu, device),
            "lengths": (cu[1:] - cu[:-1]).tolist(),
        }
        cache[key] = hit
        while len(cache) > INPUT_CACHE:
            cache.popitem(last=False)
    cache.move_to_end(key)
    state.vision_lengths[:] = [hit["image_cu_seqlens"], hit["lengths"]]  # the grouped attention's, known already
    out = {k: v for k, v in hit.items() if k != "lengths"}
    out["image_grid_thw"] = grid
    return out
