"""Test sources for the video tests: every frame paints its own index (benchcheck.video.synth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchcheck.video.synth import make_test_video

VFR_TIMES = [0.0, 0.3, 0.5, 1.4, 1.5, 2.0, 3.1, 3.2, 3.3, 5.0]

# name -> make_test_video keyword arguments (None: a broken file made by make_sources).
SOURCES: dict[str, dict[str, Any] | None] = {
    "cfr10.mp4": {"n_frames": 200, "fps": 10.0, "width": 320, "height": 180, "gop": 30},
    "grid2fps.mp4": {"n_frames": 64, "fps": 2.0, "width": 320, "height": 180, "gop": 250},
    "vfr.mp4": {"n_frames": len(VFR_TIMES), "width": 64, "height": 36, "timestamps": VFR_TIMES},
    "long.mp4": {"n_frames": 1100, "fps": 2.0, "width": 64, "height": 36, "gop": 250, "preset": "ultrafast"},
    "short.mp4": {"n_frames": 12, "fps": 2.0, "width": 320, "height": 180},
    "rot90.mp4": {"n_frames": 8, "fps": 2.0, "width": 320, "height": 180, "rotation": 90},
    "portrait.mp4": {"n_frames": 8, "fps": 2.0, "width": 180, "height": 320},
    "big43.mp4": {"n_frames": 4, "fps": 2.0, "width": 1440, "height": 1080, "preset": "ultrafast"},
    "faststart.mp4": {"n_frames": 200, "fps": 10.0, "width": 320, "height": 180, "gop": 30, "faststart": True},
    "truncated.mp4": None,
    "truncated_faststart.mp4": None,
    "empty.mp4": None,
    "notvideo.mp4": None,
}


def make_sources(folder: Path) -> Path:
    """Write every source of :data:`SOURCES` into ``folder``; returns it."""
    for name, kwargs in SOURCES.items():
        if kwargs is not None:
            make_test_video(folder / name, **kwargs)
    whole = (folder / "cfr10.mp4").read_bytes()
    (folder / "truncated.mp4").write_bytes(whole[: len(whole) // 2])
    whole = (folder / "faststart.mp4").read_bytes()
    (folder / "truncated_faststart.mp4").write_bytes(whole[: len(whole) // 2])
    (folder / "empty.mp4").write_bytes(b"")
    (folder / "notvideo.mp4").write_text("this is not a video\n")
    (folder / "notes.txt").write_text("ignored: not a video extension\n")
    return folder


def make_pts0_webm(path: Path, n_frames: int = 30, fps: int = 10, width: int = 160, height: int = 96) -> Path:
    """A VP9 webm whose packets all have pts 0 (written without timestamps); frame i paints i."""
    import av

    from benchcheck.video.synth import paint_frame

    with av.open(str(path), "w", format="webm") as out:
        stream = out.add_stream("libvpx-vp9", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"

        def mux(packets: Any) -> None:
            for p in packets:
                p.pts = p.dts = 0
                out.mux(p)

        for i in range(n_frames):
            frame = av.VideoFrame.from_ndarray(paint_frame(i, width, height), format="rgb24")
            frame.pts = i
            mux(stream.encode(frame))
        mux(stream.encode())
    return path


def item_line(k: int, video: str) -> str:
    """One JSONL item line, id ``q<k>``, showing ``video``."""
    return json.dumps({"item_id": f"q{k}", "question": "What moves?", "options": ["a", "b"], "answer": 0,
                       "video": video}) + "\n"
