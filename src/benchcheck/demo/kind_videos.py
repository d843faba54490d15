"""The scenes' clips, normalized into the store and cut into the 32-frame cache."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchcheck.demo.scenes import Scene, write_scene_video
from benchcheck.video.batch import extract_many
from benchcheck.video.store import normalize_videos


def make_scene_videos(scenes: Sequence[Scene], out: Path) -> list[Path]:
    """One clip per scene (``scene_<i>.mp4``), written once."""
    paths = []
    for s in scenes:
        p = out / f"scene_{s.index:02d}.mp4"
        if not p.is_file():
            write_scene_video(s, p)
        paths.append(p)
    return paths


def normalize_scenes(sources: Sequence[Path], store: Path, frames: Path | None = None) -> list[str]:
    """Normalize the clips (idempotent); returns the video id of each, in order. With ``frames``,
    also writes each video's v32 grid to that cache."""
    report = normalize_videos(list(sources), store)
    if report.failures:
        raise RuntimeError(f"demo clips failed to normalize: {[(o.path, o.reason) for o in report.failures]}")
    by_path = {Path(o.path).resolve(): o.content_hash for o in report.outcomes}
    ids = [by_path[Path(p).resolve()] for p in sources]
    if any(not i for i in ids):
        raise RuntimeError("a demo clip has no content hash after normalizing")
    out = [str(i) for i in ids]
    if frames is not None:
        extract_many(store, sorted(set(out)), "v32", frames)
    return out
