"""A file whose first video track is a one-frame still (a cover or thumbnail track) before the
real video: the store kept the still as the video, one frame where players show the clip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av
import numpy as np

from benchcheck.video.index import read_index
from benchcheck.video.meta import read_meta
from benchcheck.video.synth import paint_frame


def _still_then_video(path: Path) -> None:
    with av.open(str(path), "w", format="matroska") as out:
        still = out.add_stream("mjpeg", rate=1)
        still.width, still.height, still.pix_fmt = 64, 64, "yuvj420p"
        video = out.add_stream("libx264", rate=10)
        video.width, video.height, video.pix_fmt = 128, 72, "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), 200, np.uint8), format="rgb24")
        frame = frame.reformat(format="yuvj420p")
        frame.pts = 0
        for p in [*still.encode(frame), *still.encode()]:
            out.mux(p)
        for i in range(30):
            frame = av.VideoFrame.from_ndarray(paint_frame(i, 128, 72), format="rgb24")
            frame.pts = i
            for p in video.encode(frame):
                out.mux(p)
        for p in video.encode():
            out.mux(p)


def test_the_main_video_track_is_stored_not_a_still_before_it(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    _still_then_video(raw / "clip.mkv")
    store = tmp_path / "store"
    r = subprocess.run([sys.executable, "-m", "benchcheck", "videos", "normalize", str(raw), "--store", str(store),
                        "--no-progress"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    meta = read_meta(store, read_index(store / "index.jsonl")["local::raw::clip.mkv"])
    assert (meta.source["codec"], meta.width, meta.height, meta.n_frames) == ("h264", 128, 72, 6)
