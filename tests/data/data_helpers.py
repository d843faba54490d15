"""Helpers of the data tests: real frame caches and video stores; the loopback hub lives in
``benchcheck.testing.hub`` (the benchmarks use it too)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchcheck.testing.hub import FakeHub, HubHandler, Repo, Request

__all__ = ["FakeHub", "HubHandler", "Repo", "Request", "make_frame_cache", "make_video_store"]


def make_frame_cache(root: Path, n_videos: int, n_frames: int = 3, size: tuple[int, int] = (32, 18)) -> Path:
    """A real frame cache: ``root/<video_id>/frame_<k>.jpg`` (JPEG q=85) and ``frames.json``."""
    from PIL import Image

    for v in range(n_videos):
        d = root / f"{v:04x}{'ab' * 6}"
        d.mkdir(parents=True)
        for k in range(n_frames):
            Image.new("RGB", size, (v * 37 % 256, k * 50 % 256, 90)).save(d / f"frame_{k}.jpg", quality=85)
        (d / "frames.json").write_text(json.dumps({"video_id": d.name, "grid": list(range(n_frames))}))
    return root


def make_video_store(root: Path, n_videos: int) -> Path:
    """A real normalized store: ``root/<hash>/video.mp4`` (PyAV, 8 frames) and ``meta.json``."""
    import av
    import numpy as np

    for v in range(n_videos):
        d = root / hashlib.sha1(f"video{v}".encode()).hexdigest()[:16]
        d.mkdir(parents=True)
        with av.open(str(d / "video.mp4"), "w") as c:
            s = c.add_stream("mpeg4", rate=2)
            s.width, s.height, s.pix_fmt = 32, 32, "yuv420p"
            for i in range(8):
                img = np.full((32, 32, 3), (i * 30 + v * 7) % 256, dtype=np.uint8)
                for pkt in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    c.mux(pkt)
            for pkt in s.encode():
                c.mux(pkt)
        (d / "meta.json").write_text(json.dumps({"timestamps": [i / 2 for i in range(8)], "width": 32,
                                                 "height": 32, "duration_s": 4.0, "too_short": True}))
    return root
