"""The engine's vision-tower changes compute transformers' own function (float32, CPU)."""

from __future__ import annotations

import numpy as np
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.pixels import patchify
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.model.vision import use_grouped_vision_attention, use_linear_patch_embed


def tower(engine: HFEngine, pixels: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        out = engine.model.model.visual(pixels, grid_thw=grid)
    return torch.cat([out.pooler_output, *out.deepstack_features], dim=-1)


def test_grouped_attention_and_matmul_patch_embed_equal_transformers(hf_engine: HFEngine) -> None:
    # Images of two sizes, so the grouped attention runs several groups, in one call.
    enc = hf_engine.encoder
    frames, grid = enc.frames([make_jpeg(1), make_jpeg(2), make_jpeg(3, w=256, h=448), make_jpeg(4)])
    pixels = patchify(frames, hf_engine.pixels)
    g = torch.from_numpy(grid)
    ours = tower(hf_engine, pixels, g)
    ours_again = tower(hf_engine, pixels, g)  # the per-forward length memo must not go stale
    visual = hf_engine.model.model.visual
    assert "forward" in vars(visual.patch_embed)
    try:
        use_grouped_vision_attention(hf_engine.model, enabled=False)
        del visual.patch_embed.forward
        ref = tower(hf_engine, pixels, g)
        other = tower(hf_engine, pixels[: int(np.prod(grid[0]))], g[:1])
    finally:
        use_grouped_vision_attention(hf_engine.model)
        use_linear_patch_embed(hf_engine.model)
    assert torch.equal(ours, ours_again)
    rel = (ours - ref).norm() / ref.norm()
    assert rel < 1e-5, rel
    # The first image alone gives its own rows of the batched result: images never mix.
    n = other.shape[0]
    assert torch.allclose(ours[:n], other, atol=1e-4)


def test_precomputed_grid_inputs_give_the_towers_own_result(hf_engine: HFEngine) -> None:
    from benchcheck.engines.hf.model.vision_inputs import INPUT_CACHE, vision_inputs

    enc = hf_engine.encoder
    frames, grid = enc.frames([make_jpeg(5), make_jpeg(6, w=256, h=448), make_jpeg(7)])
    pixels = patchify(frames, hf_engine.pixels)
    g = torch.from_numpy(grid)
    ref = tower(hf_engine, pixels, g)  # transformers derives everything from the grid itself
    kw = vision_inputs(hf_engine.model, g)
    assert kw["image_grid_thw"] is g
    assert vision_inputs(hf_engine.model, g)["image_position_ids"] is kw["image_position_ids"]  # cached
    memo = state_of(hf_engine.model).vision_lengths
    assert memo[1] == [int(np.prod(r[1:])) for r in grid for _ in range(int(r[0]))]
    with torch.inference_mode():
        out = hf_engine.model.model.get_image_features(pixels, **kw)
    ours = torch.cat([torch.cat(out.pooler_output), *out.deepstack_features], dim=-1)
    assert torch.equal(ours, ref)
    for i in range(INPUT_CACHE + 2):  # bounded cache
        vision_inputs(hf_engine.model, torch.tensor([[1, 2 * (i + 1), 2]]))
    assert len(state_of(hf_engine.model).vision_inputs) == INPUT_CACHE


def test_a_grid_list_assembled_from_its_shapes_equals_transformers_on_the_whole_list(hf_engine: HFEngine) -> None:
    """Runs of equal shapes, a shape seen again after another, several frames in one entry (t > 1)
    and a shape met in an earlier list: bit for bit transformers' functions on the whole list."""
    from transformers.vision_utils import (
        get_vision_cu_seqlens,
        get_vision_interpolation_indices_and_weights,
        get_vision_position_ids,
    )

    from benchcheck.engines.hf.model.vision_inputs import vision_inputs

    visual = hf_engine.model.model.visual
    state = state_of(hf_engine.model)
    vision_inputs(hf_engine.model, torch.tensor([[1, 6, 4]]))  # an earlier list's shape
    grid = torch.tensor([[1, 4, 6]] * 3 + [[2, 6, 4], [1, 4, 6], [1, 8, 8], [1, 8, 8], [1, 6, 4]])
    kw = vision_inputs(hf_engine.model, grid)
    indices, weights = get_vision_interpolation_indices_and_weights(
        grid, num_grid_per_side=visual.num_grid_per_side, mode=visual.interpolation_mode,
        align_corners=visual.interpolation_align_corners, spatial_merge_size=visual.config.spatial_merge_size)
    assert torch.equal(kw["image_interp_indices"], indices)
    assert torch.equal(kw["image_interp_weights"], weights)
    assert torch.equal(kw["image_position_ids"], get_vision_position_ids(grid, visual.spatial_merge_size))
    assert torch.equal(kw["image_cu_seqlens"], get_vision_cu_seqlens(grid))
    assert {(1, 4, 6), (2, 6, 4), (1, 8, 8), (1, 6, 4)} <= set(state.vision_shapes)
