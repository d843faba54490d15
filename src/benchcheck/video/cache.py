"""Frame cache layout: ``<root>/<video_id>/frame_<k>.jpg`` plus ``frames.json`` (the authority).

``k`` is the position in the plan's grid (for the 32-frame grid the middle frame is
``frame_16.jpg``), so a cache written by the origin reads correctly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FRAMES_JSON = "frames.json"


def frame_dir(root: str | Path, video_id: str) -> Path:
    """The folder of one video's frames; refuses ids that would leave the cache root."""
    if not video_id or "/" in video_id or "\\" in video_id or video_id in (".", "..") or "\x00" in video_id:
        raise ValueError(f"video_id {video_id!r} is not a safe folder name")
    return Path(root) / video_id


def frame_path(root: str | Path, video_id: str, k: int) -> Path:
    return frame_dir(root, video_id) / f"frame_{k}.jpg"


def frames_present(root: str | Path | None, video_id: str | None) -> bool:
    """True when the cache holds a frame folder (with its ``frames.json``) for the video."""
    if root is None or not video_id:
        return False
    try:
        return (frame_dir(root, video_id) / FRAMES_JSON).is_file()
    except ValueError:
        return False


def read_frames_json(root: str | Path, video_id: str) -> dict[str, Any]:
    with (frame_dir(root, video_id) / FRAMES_JSON).open(encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{frame_dir(root, video_id) / FRAMES_JSON}: not a JSON object")
    return data
