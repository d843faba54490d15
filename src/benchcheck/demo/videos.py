"""Small demo videos, normalized into a store and cut into the 32-frame cache."""

from __future__ import annotations

from pathlib import Path

from benchcheck.video.batch import extract_many
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video

N_VIDEOS = 4


def make_demo_videos(out: Path, n: int = N_VIDEOS) -> list[Path]:
    """``n`` short H.264 clips (12-20 s at 4 fps, 320x180), each frame painting its index."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = out / f"clip_{i}.mp4"
        if not p.is_file():
            make_test_video(p, n_frames=48 + 8 * i, fps=4.0, width=320, height=180, seed=i)
        paths.append(p)
    return paths


def store_and_cache(sources: list[Path], store: Path, frames: Path) -> list[str]:
    """Normalize the clips (idempotent) and extract the v32 grid of each; returns the video ids."""
    report = normalize_videos(sources, store)
    if report.failures:
        raise RuntimeError(f"demo videos failed to normalize: {[(o.path, o.reason) for o in report.failures]}")
    ids = sorted({o.content_hash for o in report.outcomes if o.content_hash})
    extract_many(store, ids, "v32", frames)
    return ids
