"""A cut AVI source fails as a cut mp4 or mkv does. An AVI declares its video's frame count in the
stream header at its start, but FFmpeg shrinks the stream's duration by the share of the file that
is there when the file is shorter than its RIFF header says: a cut ``.avi`` declared just the
duration its frames covered and was stored as the shorter video, without a word."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import FAILURES_FILE, done_rows, last_failures
from benchcheck.video.normalize import NormalizeError, declared_duration, transcode
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import paint_frame

FPS, N_FRAMES, W, H = 10, 50, 320, 180  # 5.0 s


def make_avi(path: Path, codec: str = "libx264", bframes: int = 0, step: int = 1) -> Path:
    """A 5 s AVI (frame i paints i over a moving texture, so frames carry real data); ``step``:
    one frame every ``step`` ticks (the muxer fills the gaps with empty chunks)."""
    import numpy as np

    rng = np.random.default_rng(0)
    texture = rng.integers(0, 256, size=(2 * H, 2 * W, 3), dtype=np.uint8)
    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.codec_context.max_b_frames = bframes
        if codec == "libx264":
            stream.codec_context.options = {"preset": "ultrafast"} if not bframes else {"preset": "fast"}
        for i in range(0, N_FRAMES, step):
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
    return make_avi(tmp_path_factory.mktemp("avi") / "whole.avi")


def _cut(src: Path, dest: Path, keep: float) -> Path:
    data = src.read_bytes()
    dest.write_bytes(data[: int(len(data) * keep)])
    return dest


def test_a_cut_avi_declares_its_whole_frame_count(tmp_path: Path, whole: Path) -> None:
    cut = _cut(whole, tmp_path / "cut.avi", 0.5)
    with av.open(str(cut)) as c:
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
    cut = _cut(make_avi(tmp_path / "whole.avi", codec, bframes), tmp_path / "cut.avi", keep)
    with pytest.raises(NormalizeError, match=r"^truncated: frames end at [\d.]+ s of the 5\.0 s declared$"):
        transcode(cut, tmp_path / "o.mp4")


def test_cut_avi_is_a_failure_line_and_row_not_a_shorter_video(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    cut = _cut(whole, raw / "clip.avi", 0.5)
    make_avi(raw / "other.avi", "mpeg4")
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(raw), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    [line] = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert line.startswith(f"failed: {cut}: truncated: frames end at ")
    # the run went on: the whole file beside it is stored, all of it
    assert set(done_rows(store / "index.jsonl")) == {"local::raw::other.avi"}
    assert set(last_failures(store / FAILURES_FILE)) == {"local::raw::clip.avi"}
    # the whole file in the cut one's place is stored, all of it
    cut.write_bytes(whole.read_bytes())
    outcomes = {o.key: o for o in normalize_videos([raw], store).outcomes}
    o = outcomes["local::raw::clip.avi"]
    assert (o.status, o.n_frames) == ("done", N_FRAMES // (FPS // 2))
    assert not last_failures(store / FAILURES_FILE)
