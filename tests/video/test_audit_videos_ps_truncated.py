"""A cut MPEG program stream (``.mpg``, ``.mpeg``, ``.vob``) fails as a cut transport stream does: a
program stream declares no duration, and FFmpeg writes no program end code, so the truncation
check had nothing to compare with and a cut file was stored as the shorter video its packets
made, without a word. Every pack header and packet says how long it is: a file cut inside one
ends before it does."""

from __future__ import annotations

from pathlib import Path

import av
import pytest
from truncation_helpers import N_FRAMES, Silence, cut_at, fails_then_stored_whole, make_clip, zeroed_end

from benchcheck.video.normalize import NormalizeError, transcode

PACKET = 2048  # the size of the packets FFmpeg's program-stream muxers write


def make_ps(path: Path, fmt: str = "mpeg", codec: str = "mpeg2video", audio: bool = False) -> Path:
    """A 5 s program stream; ``fmt``: FFmpeg's MPEG-1 system muxer (``mpeg``) or its MPEG-2 one (``vob``)."""
    return make_clip(path, fmt, codec, codec_options={"preset": "ultrafast"} if codec == "libx264" else None,
                     audio=Silence("mp2", 48000, "s16", 1152, 5) if audio else None)


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ps(tmp_path_factory.mktemp("ps") / "whole.mpg")


@pytest.mark.parametrize(("fmt", "codec", "audio", "name"), [
    ("mpeg", "mpeg2video", False, "whole.mpg"), ("mpeg", "libx264", False, "whole.mpeg"),
    ("mpeg", "mpeg2video", True, "whole.mpg"), ("vob", "mpeg2video", True, "whole.vob")])
def test_a_whole_program_stream_is_stored_whole(tmp_path: Path, fmt: str, codec: str, audio: bool,
                                                name: str) -> None:
    src = make_ps(tmp_path / name, fmt, codec, audio)
    with av.open(str(src)) as c:
        assert c.format.name == "mpeg"
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert facts["n_frames"] == N_FRAMES


def test_a_program_stream_ending_on_its_end_code_is_stored_whole(tmp_path: Path, whole: Path) -> None:
    src = tmp_path / "ended.mpg"
    src.write_bytes(whole.read_bytes() + b"\x00\x00\x01\xb9")  # what other muxers write last
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert facts["n_frames"] == N_FRAMES


def _cut_points(size: int) -> list[int]:
    """Cuts inside a packet at a third, a half and nine tenths of the file, a few bytes into a
    packet (into its pack header where it has one), and inside the padding packet that ends it."""
    packets = size // PACKET
    return [packets // 3 * PACKET + 999, packets // 2 * PACKET + 1, packets * 9 // 10 * PACKET + 1500,
            packets // 2 * PACKET + 5, size - 100]


@pytest.mark.parametrize("at", range(5))
@pytest.mark.parametrize(("fmt", "codec", "audio"), [("mpeg", "mpeg2video", False), ("mpeg", "libx264", False),
                                                      ("vob", "mpeg2video", True)])
def test_a_cut_program_stream_fails_as_truncated(tmp_path: Path, at: int, fmt: str, codec: str,
                                                 audio: bool) -> None:
    src = make_ps(tmp_path / "whole.mpg", fmt, codec, audio)
    cut = cut_at(src, tmp_path / "cut.mpg", _cut_points(src.stat().st_size)[at])
    with pytest.raises(NormalizeError, match=r"^truncated: the MPEG-PS file does not end on a whole packet"):
        transcode(cut, tmp_path / "o.mp4")


def test_a_program_stream_with_a_zeroed_end_fails(tmp_path: Path, whole: Path) -> None:
    with pytest.raises(NormalizeError, match=r"^truncated: "):
        transcode(zeroed_end(whole, tmp_path / "zeroed.mpg"), tmp_path / "o.mp4")


def test_cut_mpg_is_a_failure_line_and_row_not_a_shorter_video(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    size = whole.stat().st_size
    clip = cut_at(whole, raw / "clip.mpg", size // PACKET // 2 * PACKET + 1)
    make_ps(raw / "other.vob", "vob")
    # the run goes on past the cut file: the whole one beside it is stored
    line = fails_then_stored_whole(raw, clip, whole, others=("other.vob",))
    assert line.startswith(f"failed: {clip}: truncated: the MPEG-PS file does not end on a whole packet")
