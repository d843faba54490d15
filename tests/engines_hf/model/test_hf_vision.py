"""The engine's vision-tower changes compute transformers' own function (float32, CPU)."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest
import torch
from hf_helpers import make_jpeg, variant

from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.pixels import patchify
from benchcheck.engines.hf.model import vision
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.model.vision import pow2_chunks, use_grouped_vision_attention, use_linear_patch_embed


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


# Runs of 7 and 11 images of two lengths, then 3 more of the first length (t = 3): no count a power of two.
POW2_GRID = [[1, 2, 2]] * 7 + [[1, 2, 4]] * 11 + [[3, 2, 2]]
POW2_RUNS = [7, 11, 3]


def pow2_tower(engine: Any) -> torch.Tensor:
    """The tower's output on ``POW2_GRID`` (random pixels, seeded), ``engine``'s config in force."""
    visual = engine.model.model.visual
    grid = torch.tensor(POW2_GRID)
    rows = int(grid.prod(dim=1).sum())
    pixels = torch.randn(rows, visual.patch_embed.proj.weight[0].numel(), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode(), engine.active():
        out = visual(pixels, grid_thw=grid)
    return torch.cat([out.last_hidden_state.flatten(), out.pooler_output.flatten(),
                      *(f.flatten() for f in out.deepstack_features)])


def test_pow2_chunks_are_distinct_powers_of_two_largest_first() -> None:
    assert pow2_chunks(582) == [512, 64, 4, 2]
    assert pow2_chunks(1) == [1] and pow2_chunks(2) == [2] and pow2_chunks(3) == [2, 1]
    assert pow2_chunks(1536) == [1024, 512]
    for count in [*range(1, 300), 582, 1536, 4095, 4096]:
        chunks = pow2_chunks(count)
        assert sum(chunks) == count
        assert all(c & (c - 1) == 0 for c in chunks)
        assert chunks == sorted(set(chunks), reverse=True)  # distinct, largest first
    assert doctest.testmod(vision).failed == 0


def test_power_of_two_calls_equal_one_call_per_run_and_transformers(hf_engine: HFEngine) -> None:
    assert not HFConfig().op("vision_pow2") and HFConfig(ops=("+vision_pow2",)).op("vision_pow2", cuda=False)
    assert HFConfig(ops=("+vision_pow2",)).hash != HFConfig().hash
    on = pow2_tower(variant(hf_engine, "+vision_pow2"))
    off = pow2_tower(variant(hf_engine, "-vision_pow2"))
    try:
        use_grouped_vision_attention(hf_engine.model, enabled=False)
        ref = pow2_tower(hf_engine)  # transformers' own loop, one image a call (and the engine's config again)
    finally:
        use_grouped_vision_attention(hf_engine.model)
    assert torch.allclose(on, off, rtol=1e-5, atol=1e-6), (on - off).abs().max()
    rel = (on - ref).norm() / ref.norm()
    assert rel < 1e-5, rel


def test_power_of_two_calls_take_views_in_power_of_two_counts(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[torch.Tensor, ...]] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *a: Any, **kw: Any) -> torch.Tensor:
        calls.append((q, k, v))
        return sdpa(q, k, v, *a, **kw)

    monkeypatch.setattr(vision.F, "scaled_dot_product_attention", counting)
    depth = len(hf_engine.model.model.visual.blocks)
    pow2_tower(variant(hf_engine, "+vision_pow2"))
    per_layer = [c for run in POW2_RUNS for c in pow2_chunks(run)]
    assert per_layer == [4, 2, 1, 8, 2, 1, 2, 1]
    assert [q.shape[0] for q, _, _ in calls] == per_layer * depth
    for layer in range(depth):  # each layer's chunks are views of the same q, k and v: no copies
        mine = calls[layer * len(per_layer):(layer + 1) * len(per_layer)]
        for i in range(3):
            assert len({t[i].untyped_storage().data_ptr() for t in mine}) == 1
    calls.clear()
    pow2_tower(variant(hf_engine, "-vision_pow2"))  # off: one call per run
    assert [q.shape[0] for q, _, _ in calls] == POW2_RUNS * depth
    with hf_engine.active():
        pass  # the shared engine's own config in force again
