"""A cut MPEG-TS source fails as a cut mp4 or mkv does: a transport stream declares no duration,
so the truncation check had nothing to compare with and a cut ``.ts`` was stored as the shorter
video its packets made, without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from truncation_helpers import N_FRAMES, cut, fails_then_stored_whole, make_clip, zeroed_end

from benchcheck.video.normalize import NormalizeError, transcode


def make_ts(path: Path, m2ts: bool = False) -> Path:
    """A 5 s transport stream; ``m2ts``: the Blu-ray layout, a timecode before every packet."""
    return make_clip(path, "mpegts", codec_options={"preset": "ultrafast"},
                     container_options={"mpegts_m2ts_mode": "1"} if m2ts else None)


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ts(tmp_path_factory.mktemp("ts") / "whole.ts")


@pytest.mark.parametrize("m2ts", [False, True])
def test_a_whole_transport_stream_is_stored_whole(tmp_path: Path, m2ts: bool) -> None:
    src = make_ts(tmp_path / ("whole.m2ts" if m2ts else "whole.ts"), m2ts)
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert facts["n_frames"] == N_FRAMES


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_a_cut_transport_stream_fails_as_truncated(tmp_path: Path, whole: Path, keep: float) -> None:
    clip = cut(whole, tmp_path / "cut.ts", keep)
    with pytest.raises(NormalizeError, match=r"^truncated: the MPEG-TS file does not end on a whole transport packet"):
        transcode(clip, tmp_path / "o.mp4")


def test_a_transport_stream_with_a_zeroed_end_fails(tmp_path: Path, whole: Path) -> None:
    with pytest.raises(NormalizeError, match=r"^truncated: "):
        transcode(zeroed_end(whole, tmp_path / "zeroed.ts"), tmp_path / "o.mp4")


def test_cut_ts_is_a_failure_line_and_row_not_a_shorter_video(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    clip = cut(whole, raw / "clip.ts", 0.5)
    line = fails_then_stored_whole(raw, clip, whole)
    assert line.startswith(f"failed: {clip}: truncated: ")
