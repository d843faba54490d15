"""Clips to cut, cuts, and the CLI run of the truncated-source tests (mkv, avi, MPEG-TS, MPEG-PS).

Every clip is :data:`N_FRAMES` frames at :data:`FPS` (5.0 s) of :data:`W` x :data:`H`, whatever its
container, so a cut one is told from a whole one by the same numbers in every test.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import FAILURES_FILE, done_rows, last_failures
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import paint_frame

FPS, N_FRAMES, W, H = 10, 50, 320, 180  # 5.0 s


@dataclass(frozen=True)
class Silence:
    """A silent audio stream muxed after the video: ``seconds`` of ``frame_size``-sample frames."""

    codec: str
    rate: int
    sample_format: str  # "fltp" (float32 samples) or "s16" (int16 samples)
    frame_size: int
    seconds: int


def make_clip(path: Path, fmt: str, codec: str = "libx264", *, codec_options: dict[str, str] | None = None,
              max_b_frames: int | None = None, step: int = 1, audio: Silence | None = None,
              container_options: dict[str, str] | None = None) -> Path:
    """A 5 s clip in container ``fmt`` (frame i paints i over a moving texture, so frames carry real
    data); ``step``: one frame every ``step`` ticks; ``None`` options leave the codec's defaults."""
    import numpy as np

    rng = np.random.default_rng(0)
    texture = rng.integers(0, 256, size=(2 * H, 2 * W, 3), dtype=np.uint8)
    with av.open(str(path), "w", format=fmt, options=container_options or {}) as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        if max_b_frames is not None:
            stream.codec_context.max_b_frames = max_b_frames
        if codec_options is not None:
            stream.codec_context.options = codec_options
        sound = out.add_stream(audio.codec, rate=audio.rate) if audio is not None else None
        for i in range(0, N_FRAMES, step):
            bg = texture[(2 * i) % H:(2 * i) % H + H, (3 * i) % W:(3 * i) % W + W]
            frame = av.VideoFrame.from_ndarray(paint_frame(i, W, H, bg), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, FPS)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None and audio is not None:
            dtype = np.float32 if audio.sample_format == "fltp" else np.int16
            samples = np.zeros((1, audio.frame_size), dtype=dtype)
            for k in range(audio.seconds * audio.rate // audio.frame_size):
                a = av.AudioFrame.from_ndarray(samples, format=audio.sample_format, layout="mono")
                a.sample_rate, a.pts, a.time_base = audio.rate, k * audio.frame_size, Fraction(1, audio.rate)
                for packet in sound.encode(a):
                    out.mux(packet)
            for packet in sound.encode():
                out.mux(packet)
    return path


def cut_at(src: Path, dest: Path, size: int) -> Path:
    """``dest``: the first ``size`` bytes of ``src``."""
    dest.write_bytes(src.read_bytes()[:size])
    return dest


def cut(src: Path, dest: Path, keep: float) -> Path:
    """``dest``: the first ``keep`` share of ``src``'s bytes."""
    return cut_at(src, dest, int(src.stat().st_size * keep))


def zeroed(data: bytes, offset: int, path: Path) -> Path:
    """``path``: ``data`` with the 4 KiB from ``offset`` zeroed."""
    d = bytearray(data)
    d[offset:offset + 4096] = bytes(4096)
    path.write_bytes(bytes(d))
    return path


def zeroed_end(src: Path, path: Path) -> Path:
    """``path``: ``src`` with its last 4 KiB zeroed, as a download that stopped leaves its place kept, never
    filled."""
    data = src.read_bytes()
    return zeroed(data, len(data) - 4096, path)


def fails_then_stored_whole(raw: Path, cut_file: Path, whole: Path, others: tuple[str, ...] = ()) -> str:
    """``videos normalize`` over ``raw`` through the CLI, ``raw`` holding the cut ``cut_file`` and the
    whole files named in ``others``: the run exits 1 with one ``failed:`` line (returned, for its
    reason), goes on to store the others, and records the cut one in ``failures.jsonl``. Then
    ``whole`` put in the cut one's place is stored, all of it, and its failure is gone."""
    store = raw.parent / "store"
    key = f"local::{raw.name}::{cut_file.name}"
    other_keys = {f"local::{raw.name}::{name}" for name in others}
    res = CliRunner().invoke(main, ["videos", "normalize", str(raw), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    [line] = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert set(done_rows(store / "index.jsonl")) == other_keys
    assert set(last_failures(store / FAILURES_FILE)) == {key}
    cut_file.write_bytes(whole.read_bytes())
    outcomes = {o.key: o for o in normalize_videos([raw], store).outcomes}
    assert {k: o.status for k, o in outcomes.items()} == {key: "done"} | dict.fromkeys(other_keys, "skipped")
    assert outcomes[key].n_frames == N_FRAMES // (FPS // 2)
    assert not last_failures(store / FAILURES_FILE)
    return line
