"""Frame plans (pure): names, the time-uniform grid, the fps grid, the context cap, sizes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchcheck.engines.hf.inputs.decode import ResizeRule
from benchcheck.protocol import shuffled_order
from benchcheck.video.plans import (
    TOKEN_BUDGET,
    SizeTarget,
    fps_grid,
    n_max,
    nearest_index,
    parse_plan,
    plan_frames,
    shuffle_plan,
    tokens_per_frame,
    uniform_grid,
)

TS20 = [i * 0.5 for i in range(20)]


@pytest.mark.parametrize(("name", "canonical", "kind", "size"), [
    ("v32", "v32", "grid", SizeTarget("long", 448)),
    ("mid", "mid", "mid", SizeTarget("long", 448)),
    ("v_1", "v_1", "mid", SizeTarget("storage")),
    ("v_32", "v_32", "grid", SizeTarget("storage")),
    ("v_32_s168", "v_32_s168", "grid", SizeTarget("short", 168)),
    ("32_s224", "v_32_s224", "grid", SizeTarget("short", 224)),
    ("v_8_s224", "v_8_s224", "grid", SizeTarget("short", 224)),
    ("v_128_s224", "v_128_s224", "grid", SizeTarget("short", 224)),
    ("fps1_s224", "v_fps1_s224", "fps", SizeTarget("short", 224)),
    ("v_fps0.25_s224", "v_fps0.25_s224", "fps", SizeTarget("short", 224)),
])
def test_parse_plan_names_and_aliases(name: str, canonical: str, kind: str, size: SizeTarget) -> None:
    spec = parse_plan(name)
    assert (spec.name, spec.kind, spec.size) == (canonical, kind, size)


@pytest.mark.parametrize("bad", ["v_blind", "v33x", "fps0_s224", "v_0", "grid"])
def test_parse_plan_rejects_unknown_names(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_plan(bad)


def test_uniform_grid_documented_example() -> None:
    assert uniform_grid(TS20, 4) == [2, 7, 12, 17]


def test_uniform_grid_with_as_many_frames_returns_each_once() -> None:
    assert uniform_grid(TS20, 20) == list(range(20))


def test_uniform_grid_larger_than_video_repeats_frames_in_order() -> None:
    grid = uniform_grid(TS20[:5], 32)
    assert len(grid) == 32
    assert grid == sorted(grid) and set(grid) == {0, 1, 2, 3, 4}


def test_mid_is_grid32_position_16() -> None:
    ts = [i * 0.5 for i in range(100)]
    plan = plan_frames("mid", ts, 1280, 720)
    assert plan.positions == (16,)
    assert plan.indices == (uniform_grid(ts, 32)[16],)
    assert plan_frames("v_1", ts, 1280, 720).indices == plan.indices


def test_nearest_index_ties_go_to_the_earlier_frame() -> None:
    assert nearest_index([0.0, 1.0], 0.5) == 0
    assert nearest_index([0.0, 1.0], 0.51) == 1
    assert nearest_index([0.0, 1.0], -3) == 0
    assert nearest_index([0.0, 1.0], 9) == 1


def test_fps_grid_nearest_frame_and_dedup_on_variable_frame_rate() -> None:
    ts = [0.0, 0.3, 0.5, 1.4, 1.5, 2.0, 3.1, 3.2, 3.3, 5.0]
    # ticks at 0, 1, 2, 3, 4, 5 s -> nearest 0, 3 (1.4 beats 0.5), 5, 6 (3.1), 8 (3.3 beats 5.0), 9
    assert fps_grid(ts, 1.0) == [0, 3, 5, 6, 8, 9]
    # ticks every 0.25 s: consecutive ticks often fall on the same frame; repeats are dropped
    dense = fps_grid(ts, 4.0)
    assert dense == sorted(set(dense)) and dense[0] == 0 and dense[-1] == 9


def test_tokens_and_cap_for_16_9_at_short_side_224() -> None:
    w, h = SizeTarget("short", 224).output_size(1280, 720)
    assert (w, h) == (398, 224)
    assert tokens_per_frame(w, h) == 97
    assert n_max(w, h) == 582


def test_fps_plan_caps_long_video_and_records_it() -> None:
    ts = [i * 0.5 for i in range(1024)]  # 512 s at 2 fps
    plan = plan_frames("v_fps2_s224", ts, 1280, 720)
    assert plan.extra["n_grid"] == 1024 and plan.extra["n_max"] == 582
    assert plan.extra["capped_ctx"] is True
    assert plan.extra["n_frames_used"] == len(plan.indices) <= 582
    assert list(plan.indices) == sorted(set(plan.indices))
    assert plan.indices[0] < 2 and plan.indices[-1] > 1020  # spans the whole video
    small = plan_frames("v_fps0.25_s224", ts, 1280, 720)
    assert small.extra["capped_ctx"] is False and small.extra["n_frames_used"] == small.extra["n_grid"] == 128


def test_cap_is_at_most_max_images() -> None:
    assert n_max(64, 36, token_budget=200_000) == 1024
    assert n_max(64, 36, max_images=100) == 100


@pytest.mark.parametrize(("width", "height"), [(64, 36), (176, 144), (160, 120), (320, 180), (299, 168), (224, 168)])
def test_small_frames_are_counted_as_the_processor_enlarges_them(width: int, height: int) -> None:
    """A frame below Qwen3-VL's 65,536-pixel minimum reaches the model upscaled: the cap counts
    those tokens, so the frames it lets through fit the budget as the engine counts them (the
    seed's count let 1,024 QCIF frames, about 80,000 tokens, at a 65,536-token context)."""
    rule = ResizeRule(32, 65_536, 16_777_216)
    h, w = rule.size(height, width)
    real = (h // 32) * (w // 32) + 6
    assert tokens_per_frame(width, height) == real > math.ceil(width / 32) * math.ceil(height / 32) + 6
    assert n_max(width, height) * real <= TOKEN_BUDGET - 1500


@pytest.mark.parametrize(("width", "height"), [(398, 224), (299, 224), (597, 336), (796, 448), (1280, 720)])
def test_frames_the_processor_does_not_enlarge_keep_the_seed_count(width: int, height: int) -> None:
    assert tokens_per_frame(width, height) == math.ceil(width / 32) * math.ceil(height / 32) + 6


def test_v128_sends_all_frames_of_a_short_video() -> None:
    plan = plan_frames("v_128_s224", TS20, 320, 180)
    assert plan.indices == tuple(range(20)) and plan.extra["capped"] is True
    full = plan_frames("v_128_s224", [i * 0.5 for i in range(300)], 320, 180)
    assert len(full.indices) == 128 and full.extra["capped"] is False


@pytest.mark.parametrize(("target", "size", "out"), [
    (SizeTarget("long", 448), (1280, 720), (448, 252)),
    (SizeTarget("long", 448), (720, 1280), (252, 448)),
    (SizeTarget("long", 448), (960, 720), (448, 336)),
    (SizeTarget("long", 448), (320, 180), (320, 180)),  # never upscaled
    (SizeTarget("short", 168), (1280, 720), (299, 168)),
    (SizeTarget("short", 224), (640, 480), (299, 224)),
    (SizeTarget("short", 448), (854, 480), (797, 448)),
    (SizeTarget("storage"), (1280, 720), (1280, 720)),
])
def test_size_targets(target: SizeTarget, size: tuple[int, int], out: tuple[int, int]) -> None:
    assert target.output_size(*size) == out


def test_shuffle_plan_uses_the_protocol_order() -> None:
    plan = plan_frames("v32", [i * 0.5 for i in range(64)], 1280, 720)
    shuffled = shuffle_plan(plan, "bench_7")
    order = shuffled_order("bench_7", 32)
    assert shuffled.positions == tuple(order)
    assert shuffled.indices == tuple(plan.indices[j] for j in order)


def test_non_increasing_timestamps_are_refused() -> None:
    with pytest.raises(ValueError):
        plan_frames("v32", [0.0, 1.0, 0.5], 64, 36)


@given(st.lists(st.floats(0, 0.9), min_size=1, max_size=200), st.integers(1, 300))
def test_grid_is_ordered_in_range_and_sized(gaps: list[float], n: int) -> None:
    ts = [0.0]
    for g in gaps[1:]:
        ts.append(ts[-1] + g)
    grid = uniform_grid(ts, n)
    assert len(grid) == n and grid == sorted(grid)
    assert all(0 <= i < len(ts) for i in grid)


@given(st.integers(1, 400), st.sampled_from([0.25, 0.5, 1.0, 2.0]))
def test_fps_grid_on_a_2fps_store_takes_every_kth_frame(n: int, fps: float) -> None:
    ts = [i * 0.5 for i in range(n)]
    step = int(2 / fps)
    assert fps_grid(ts, fps) == list(range(0, n, step))


def test_an_fps_plan_above_the_highest_rate_is_refused_by_name() -> None:
    """A rate past any source's (up to one that reads as infinity) is refused when the plan is
    read: its grid of ticks never finished building, or overflowed with a traceback."""
    from benchcheck.video.plans import MAX_PLAN_FPS, parse_plan

    assert parse_plan(f"v_fps{MAX_PLAN_FPS}").fps == MAX_PLAN_FPS
    for name in (f"v_fps{MAX_PLAN_FPS + 1}", "v_fps1000000000", "v_fps" + "9" * 400 + "_s224"):
        with pytest.raises(ValueError, match=rf"plan '{name[:12]}.*at most {MAX_PLAN_FPS}"):
            parse_plan(name)
