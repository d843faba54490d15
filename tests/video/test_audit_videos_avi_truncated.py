"""A cut AVI source fails as a cut mp4 or mkv does. An AVI declares its video's frame count in the
stream header at its start, but FFmpeg shrinks the stream's duration by the share of the file that
is there when the file is shorter than its RIFF header says: a cut ``.avi`` declared just the
duration its frames covered and was stored as the shorter video, without a word."""

from __future__ import annotations

from pathlib import Path

import av
import pytest
from truncation_helpers import N_FRAMES, cut, fails_then_stored_whole, make_clip

from benchcheck.video.normalize import NormalizeError, transcode
from benchcheck.video.truncation import declared_duration


def make_avi(path: Path, codec: str = "libx264", bframes: int = 0, step: int = 1) -> Path:
    """A 5 s AVI; ``step``: one frame every ``step`` ticks (the muxer fills the gaps with empty chunks)."""
    options = ({"preset": "fast"} if bframes else {"preset": "ultrafast"}) if codec == "libx264" else None
    return make_clip(path, "avi", codec, codec_options=options, max_b_frames=bframes, step=step)


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_avi(tmp_path_factory.mktemp("avi") / "whole.avi")


def test_a_cut_avi_declares_its_whole_frame_count(tmp_path: Path, whole: Path) -> None:
    clip = cut(whole, tmp_path / "cut.avi", 0.5)
    with av.open(str(clip)) as c:
        s = c.streams.video[0]
        assert s.frames == N_FRAMES
        assert float(s.duration * s.time_base) < 3.0  # what the check read: shrunk by the file's size
        assert declared_duration(c, s) == pytest.approx(5.0)


@pytest.mark.parametrize(("codec", "bframes", "step"), [("libx264", 0, 1), ("libx264", 3, 1), ("mpeg4", 2, 1),
                                                         ("mpeg4", 0, 2)])
def test_a_whole_avi_is_stored_whole(tmp_path: Path, codec: str, bframes: int, step: int) -> None:
    src = make_avi(tmp_path / "whole.avi", codec, bframes, step)
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert facts["n_frames"] == N_FRAMES // step
    assert facts["duration"] == pytest.approx(5.0)


@pytest.mark.parametrize("keep", [0.3, 0.5, 0.9])
@pytest.mark.parametrize(("codec", "bframes"), [("libx264", 0), ("libx264", 3), ("mpeg4", 2)])
def test_a_cut_avi_fails_as_truncated(tmp_path: Path, keep: float, codec: str, bframes: int) -> None:
    clip = cut(make_avi(tmp_path / "whole.avi", codec, bframes), tmp_path / "cut.avi", keep)
    with pytest.raises(NormalizeError, match=r"^truncated: frames end at [\d.]+ s of the 5\.0 s declared$"):
        transcode(clip, tmp_path / "o.mp4")


def test_cut_avi_is_a_failure_line_and_row_not_a_shorter_video(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    clip = cut(whole, raw / "clip.avi", 0.5)
    make_avi(raw / "other.avi", "mpeg4")
    # the run goes on past the cut file: the whole one beside it is stored, all of it
    line = fails_then_stored_whole(raw, clip, whole, others=("other.avi",))
    assert line.startswith(f"failed: {clip}: truncated: frames end at ")
