"""A Matroska or WebM clip whose first frame is not at time 0 (a stream recording cut with its
timestamps kept) is stored whole. Its ``DURATION`` tag and segment duration are where the track
ends on the file's timeline, so the check read the time before the first frame as missing frames
and failed a whole clip as truncated; a cut one still fails."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest
from truncation_helpers import cut

from benchcheck.video.normalize import NormalizeError, transcode
from benchcheck.video.synth import paint_frame

FPS, N, START = 10, 20, 30  # 2 s of frames, the first at 3 s


def make_offset_clip(path: Path, fmt: str, codec: str) -> Path:
    with av.open(str(path), "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        if codec == "libx264":
            stream.codec_context.options = {"preset": "ultrafast"}
        for i in range(N):
            frame = av.VideoFrame.from_ndarray(paint_frame(i, 64, 48), format="rgb24")
            frame.pts, frame.time_base = START + i, Fraction(1, FPS)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.mark.parametrize(("fmt", "codec", "suffix"), [("matroska", "libx264", "mkv"), ("webm", "libvpx-vp9", "webm")])
def test_a_clip_starting_late_is_stored_whole(tmp_path: Path, fmt: str, codec: str, suffix: str) -> None:
    src = make_offset_clip(tmp_path / f"late.{suffix}", fmt, codec)
    with av.open(str(src)) as c:
        assert c.streams.video[0].start_time == START * 100  # the first frame is at 3 s
    _, facts = transcode(src, tmp_path / "out.mp4")
    assert facts["n_frames"] == N
    assert facts["duration"] == pytest.approx(N / FPS)


def test_a_cut_clip_starting_late_still_fails(tmp_path: Path) -> None:
    whole = make_offset_clip(tmp_path / "late.mkv", "matroska", "libx264")
    half = cut(whole, tmp_path / "half.mkv", 0.5)
    with pytest.raises(NormalizeError, match=r"truncated: frames end at \d\.\d s of the 2\.0 s declared"):
        transcode(half, tmp_path / "out.mp4")
