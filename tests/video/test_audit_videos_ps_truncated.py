"""A cut MPEG program stream (``.mpg``, ``.mpeg``, ``.vob``) fails as a cut transport stream does: a
program stream declares no duration, and FFmpeg writes no program end code, so the truncation
check had nothing to compare with and a cut file was stored as the shorter video its packets
made, without a word. Every pack header and packet says how long it is: a file cut inside one
ends before it does."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import FAILURES_FILE, done_rows, last_failures
from benchcheck.video.normalize import NormalizeError, transcode
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import paint_frame

FPS, N_FRAMES, W, H = 10, 50, 320, 180  # 5.0 s
PACKET = 2048  # the size of the packets FFmpeg's program-stream muxers write


def make_ps(path: Path, fmt: str = "mpeg", codec: str = "mpeg2video", audio: bool = False) -> Path:
    """A 5 s program stream (frame i paints i over a moving texture, so frames carry real data);
    ``fmt``: FFmpeg's MPEG-1 system muxer (``mpeg``) or its MPEG-2 one (``vob``)."""
    import numpy as np

    rng = np.random.default_rng(0)
    texture = rng.integers(0, 256, size=(2 * H, 2 * W, 3), dtype=np.uint8)
    with av.open(str(path), "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        if codec == "libx264":
            stream.codec_context.options = {"preset": "ultrafast"}
        sound = out.add_stream("mp2", rate=48000) if audio else None
        for i in range(N_FRAMES):
            bg = texture[(2 * i) % H:(2 * i) % H + H, (3 * i) % W:(3 * i) % W + W]
            frame = av.VideoFrame.from_ndarray(paint_frame(i, W, H, bg), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, FPS)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None:
            samples = np.zeros((1, 1152), dtype=np.int16)
            for k in range(5 * 48000 // 1152):
                a = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
                a.sample_rate, a.pts, a.time_base = 48000, k * 1152, Fraction(1, 48000)
                for packet in sound.encode(a):
                    out.mux(packet)
            for packet in sound.encode():
                out.mux(packet)
    return path


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ps(tmp_path_factory.mktemp("ps") / "whole.mpg")


def _cut_at(src: Path, dest: Path, size: int) -> Path:
    dest.write_bytes(src.read_bytes()[:size])
    return dest


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
    cut = _cut_at(src, tmp_path / "cut.mpg", _cut_points(src.stat().st_size)[at])
    with pytest.raises(NormalizeError, match=r"^truncated: the MPEG-PS file does not end on a whole packet"):
        transcode(cut, tmp_path / "o.mp4")


def test_a_program_stream_with_a_zeroed_end_fails(tmp_path: Path, whole: Path) -> None:
    data = bytearray(whole.read_bytes())
    data[-4096:] = bytes(4096)  # a download that stopped: its place kept, never filled
    (tmp_path / "zeroed.mpg").write_bytes(bytes(data))
    with pytest.raises(NormalizeError, match=r"^truncated: "):
        transcode(tmp_path / "zeroed.mpg", tmp_path / "o.mp4")


def test_cut_mpg_is_a_failure_line_and_row_not_a_shorter_video(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    size = whole.stat().st_size
    cut = _cut_at(whole, raw / "clip.mpg", size // PACKET // 2 * PACKET + 1)
    make_ps(raw / "other.vob", "vob")
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(raw), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    [line] = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert line.startswith(f"failed: {cut}: truncated: the MPEG-PS file does not end on a whole packet")
    # the run went on: the whole file beside it is stored
    assert set(done_rows(store / "index.jsonl")) == {"local::raw::other.vob"}
    assert set(last_failures(store / FAILURES_FILE)) == {"local::raw::clip.mpg"}
    # the whole file in the cut one's place is stored, all of it
    cut.write_bytes(whole.read_bytes())
    outcomes = {o.key: o for o in normalize_videos([raw], store).outcomes}
    o = outcomes["local::raw::clip.mpg"]
    assert (o.status, o.n_frames) == ("done", N_FRAMES // (FPS // 2))
    assert not last_failures(store / FAILURES_FILE)
