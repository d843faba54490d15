"""What a folder given as a frame cache holds, told apart by the marks each kind of folder has: a
frame cache, ``<video_id>/frames.json`` (``video.cache``); a normalized store, ``normalized/`` or
``index.jsonl`` (``video.meta.store_problem``); a folder of videos, files with a video extension
(``video.store.VIDEO_EXTENSIONS``). Every command that reads ``--frames`` checks it by this one rule.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchcheck.errors import shown
from benchcheck.video.cache import FRAMES_JSON
from benchcheck.video.meta import store_problem
from benchcheck.video.store import VIDEO_EXTENSIONS

EXTRACT = "'benchcheck frames extract'"


def frames_refusal(root: str | Path) -> str | None:
    """The one line refusing ``root`` as ``--frames`` (None when it is a frame cache, or may become
    one: an empty folder). A store or a folder of videos read as a frame cache gave every visual
    item "no frames" (failure rows, exit 0, a hint to extract frames that were never the problem)."""
    path = Path(root)
    name = shown(root)
    if not path.is_dir():
        what = "not a folder" if path.exists() else "no such folder"
        return f"--frames {name}: {what} (made by {EXTRACT})"
    if _has_frames(path):
        return None
    if store_problem(path) is None:
        return (f"--frames {name} is a video store; --frames wants the frame cache made by {EXTRACT}; "
                "pass it as --store")
    video = _a_video(path)
    if video is not None:
        return (f"--frames {name} is a folder of videos ({shown(video)}); --frames wants the frame cache made by "
                f"{EXTRACT} from a store, which 'benchcheck videos normalize' makes of these videos")
    return None


def _has_frames(path: Path) -> bool:
    """Some ``<video_id>/frames.json`` in the folder (a cache's first entry has one: stops there)."""
    with os.scandir(path) as entries:
        return any(e.is_dir() and (Path(e.path) / FRAMES_JSON).is_file() for e in entries)


def _a_video(path: Path) -> str | None:
    """A video file in the folder or one level below (its path from the folder), else None."""
    def videos(folder: str) -> tuple[list[str], list[str]]:
        """The folder's video files and its folders, by name (hidden ones skipped)."""
        with os.scandir(folder) as entries:
            shown_entries = sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)
        return ([e.name for e in shown_entries if not e.is_dir() and Path(e.name).suffix.lower() in VIDEO_EXTENSIONS],
                [e.name for e in shown_entries if e.is_dir()])

    files, subdirs = videos(str(path))
    if files:
        return files[0]
    for sub in subdirs:
        inner, _ = videos(str(path / sub))
        if inner:
            return f"{sub}/{inner[0]}"
    return None
