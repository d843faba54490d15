"""A cut MPEG-TS source fails as a cut mp4 or mkv does: a transport stream declares no duration,
so the truncation check had nothing to compare with and a cut ``.ts`` was stored as the shorter
video its packets made, without a word."""

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


def make_ts(path: Path, m2ts: bool = False) -> Path:
    """A 5 s transport stream (frame i paints i over a moving texture, so frames carry real data);
    ``m2ts``: the Blu-ray layout, a timecode before every packet."""
    import numpy as np

    rng = np.random.default_rng(0)
    texture = rng.integers(0, 256, size=(2 * H, 2 * W, 3), dtype=np.uint8)
    options = {"mpegts_m2ts_mode": "1"} if m2ts else {}
    with av.open(str(path), "w", format="mpegts", options=options) as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.codec_context.options = {"preset": "ultrafast"}
        for i in range(N_FRAMES):
            bg = texture[(2 * i) % H:(2 * i) % H + H, (3 * i) % W:(3 * i) % W + W]
            frame = av.VideoFrame.from_ndarray(paint_frame(i, W, H, bg), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, FPS)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ts(tmp_path_factory.mktemp("ts") / "whole.ts")


def _cut(src: Path, dest: Path, keep: float) -> Path:
    data = src.read_bytes()
    dest.write_bytes(data[: int(len(data) * keep)])
    return dest


@pytest.mark.parametrize("m2ts", [False, True])
def test_a_whole_transport_stream_is_stored_whole(tmp_path: Path, m2ts: bool) -> None:
    src = make_ts(tmp_path / ("whole.m2ts" if m2ts else "whole.ts"), m2ts)
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert facts["n_frames"] == N_FRAMES


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_a_cut_transport_stream_fails_as_truncated(tmp_path: Path, whole: Path, keep: float) -> None:
    cut = _cut(whole, tmp_path / "cut.ts", keep)
    with pytest.raises(NormalizeError, match=r"^truncated: the MPEG-TS file does not end on a whole transport packet"):
        transcode(cut, tmp_path / "o.mp4")


def test_a_transport_stream_with_a_zeroed_end_fails(tmp_path: Path, whole: Path) -> None:
    data = bytearray(whole.read_bytes())
    data[-4096:] = bytes(4096)  # a download that stopped: its place kept, never filled
    (tmp_path / "zeroed.ts").write_bytes(bytes(data))
    with pytest.raises(NormalizeError, match=r"^truncated: "):
        transcode(tmp_path / "zeroed.ts", tmp_path / "o.mp4")


def test_cut_ts_is_a_failure_line_and_row_not_a_shorter_video(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    cut = _cut(whole, raw / "clip.ts", 0.5)
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(raw), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    [line] = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert line.startswith(f"failed: {cut}: truncated: ")
    assert not done_rows(store / "index.jsonl")
    assert set(last_failures(store / FAILURES_FILE)) == {"local::raw::clip.ts"}
    # the whole file in its place is stored, all of it
    cut.write_bytes(whole.read_bytes())
    [o] = normalize_videos([raw], store).outcomes
    assert (o.status, o.n_frames) == ("done", N_FRAMES // (FPS // 2))
    assert not last_failures(store / FAILURES_FILE)
