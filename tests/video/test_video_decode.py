"""Sparse decoding: the run schedule (pure) and real decoding of painted mp4 files."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchcheck.video.decode import (
    SEEK_COST,
    DecodeStats,
    PacketIndex,
    build_index,
    decode_frames,
    schedule_runs,
)
from benchcheck.video.synth import make_test_video, read_frame_code, read_frame_index


def _index(n: int, keyframes: set[int]) -> PacketIndex:
    """A stream without B-frames: packet p shows frame p."""
    return build_index(list(range(n)), [p in keyframes for p in range(n)], Fraction(1, 2))


def _cost(runs: list, seek_cost: float = SEEK_COST) -> float:
    return sum(r.end - r.start + 1 for r in runs) + seek_cost * (len(runs) - 1)


def _covered(index: PacketIndex, runs: list, frames: list[int]) -> bool:
    return all(any(r.start <= index.entry[i] and index.packet_of[i] <= r.end for r in runs) for i in frames)


def test_sparse_frames_on_a_long_gop_seek_to_each_keyframe() -> None:
    index = _index(1000, {0, 250, 500, 750})
    runs = schedule_runs(index, [10, 260, 510, 760])
    assert [(r.start, r.end) for r in runs] == [(0, 10), (250, 260), (500, 510), (750, 760)]


def test_every_frame_makes_one_sequential_pass() -> None:
    index = _index(120, set(range(0, 120, 8)))
    assert [(r.start, r.end) for r in schedule_runs(index, range(120))] == [(0, 119)]


def test_packets_before_a_keyframe_that_nobody_wants_are_jumped_over() -> None:
    index = _index(120, set(range(0, 120, 8)))
    runs = schedule_runs(index, list(range(0, 120, 2)))
    assert [(r.start, r.end) for r in runs] == [(k, k + 6) for k in range(0, 120, 8)]


def test_frames_late_in_a_gop_continue_rather_than_seek() -> None:
    index = _index(100, {0, 50})
    # frame 49 follows frame 45 in the same GOP; 52 is just after keyframe 50: continuing is cheaper
    assert [(r.start, r.end) for r in schedule_runs(index, [45, 49, 52])] == [(0, 52)]
    # far into the next GOP the jump to its keyframe wins
    assert [(r.start, r.end) for r in schedule_runs(index, [5, 60])] == [(0, 5), (50, 60)]


def test_forced_strategies() -> None:
    index = _index(1000, {0, 250, 500, 750})
    assert len(schedule_runs(index, [10, 260, 510], "sequential")) == 1
    assert len(schedule_runs(index, [10, 11, 260], "seek")) == 2


def test_open_gop_leading_frames_start_at_the_previous_keyframe() -> None:
    # decode order: I0 P4 B1 B2 B3 | I8(key) B5 B6 B7 ... B5..B7 are shown before I8
    pts = [0, 4, 1, 2, 3, 8, 5, 6, 7]
    index = build_index(pts, [True, False, False, False, False, True, False, False, False], Fraction(1, 2))
    assert index.entry[5] == 0  # frame 5 (packet 6) needs the previous GOP
    assert index.entry[8] == 5


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 400), st.data())
def test_auto_is_never_costlier_than_seek_or_sequential(n: int, data: st.DataObject) -> None:
    keys = set(data.draw(st.lists(st.integers(0, n - 1), max_size=20))) | {0}
    wanted = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=60))
    index = _index(n, keys)
    auto = schedule_runs(index, wanted, "auto")
    assert _covered(index, auto, wanted)
    for other in ("seek", "sequential"):
        runs = schedule_runs(index, wanted, other)  # type: ignore[arg-type]
        assert _covered(index, runs, wanted)
        assert _cost(auto) <= _cost(runs) + 1e-9


@pytest.fixture(scope="module")
def bframes_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A long-GOP source with B-frames (x264 defaults), 300 frames at 30 fps."""
    return make_test_video(tmp_path_factory.mktemp("dec") / "b.mp4", 300, fps=30.0, width=128, height=72,
                           gop=120, bframes=3)


def _indices(jpegs: dict[int, np.ndarray]) -> dict[int, int]:
    return {i: read_frame_index(a) for i, a in jpegs.items()}


@pytest.mark.parametrize("strategy", ["auto", "seek", "sequential"])
def test_decoded_frames_are_the_wanted_ones(bframes_video: Path, strategy: str) -> None:
    wanted = [0, 1, 7, 119, 120, 121, 200, 299]
    stats = DecodeStats()
    got = decode_frames(bframes_video, wanted, lambda f: f.to_ndarray(format="rgb24"),
                        strategy=strategy, stats=stats)  # type: ignore[arg-type]
    assert _indices(got) == {i: i for i in wanted}
    assert stats.converted == len(wanted)


def test_sparse_plan_decodes_fewer_packets_than_a_full_pass(bframes_video: Path) -> None:
    auto, seq = DecodeStats(), DecodeStats()
    wanted = [5, 125, 245]
    decode_frames(bframes_video, wanted, lambda f: f.pts, stats=auto)
    decode_frames(bframes_video, wanted, lambda f: f.pts, strategy="sequential", stats=seq)
    assert auto.runs == 3 and seq.runs == 1
    assert auto.packets < seq.packets / 2
    # non-reference B-frames that nobody wants are skipped by the decoder
    assert seq.decoded < seq.packets


def test_out_of_range_frame_is_an_error(bframes_video: Path) -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.299"):
        decode_frames(bframes_video, [300], lambda f: f.pts)


def test_frame_code_survives_rotation_and_jpeg() -> None:
    from io import BytesIO

    from PIL import Image

    from benchcheck.video.synth import paint_frame

    for index in (0, 1, 1234, 4095):
        img = paint_frame(index, 96, 54)
        for turns in range(4):
            buf = BytesIO()
            Image.fromarray(np.ascontiguousarray(np.rot90(img, k=turns))).save(buf, "JPEG", quality=85)
            assert read_frame_code(buf.getvalue()) == (index, turns)
    with pytest.raises(ValueError):
        read_frame_index(np.full((36, 64, 3), 128, np.uint8))
    with pytest.raises(ValueError):
        paint_frame(4096, 64, 36)
