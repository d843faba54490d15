"""The normalized store's layout and ``meta.json`` (docs/PROTOCOL.md, "Videos").

``<store>/normalized/<content_hash>/video.mp4`` holds the normalized video and ``meta.json``
describes it. :func:`read_meta` also reads a store made by the original runs, whose field names may
differ slightly (``frame_timestamps``, ``duration_s``, ``frame_count``...).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.video.index import INDEX_FILE

NORMALIZED = "normalized"
VIDEO_FILE = "video.mp4"
META_FILE = "meta.json"
TOO_SHORT_FRAMES = 32
META_SCHEMA_VERSION = 1


def store_problem(store: str | Path) -> str | None:
    """Why ``store`` is not a normalized store one can read (None if it is): a store holds
    ``normalized/`` or ``index.jsonl``, as ``benchcheck videos normalize`` makes it even when no
    video got in. Every command that reads a store checks it by this one rule."""
    path = Path(store)
    if str(store) == "" or not path.exists():
        return "no such folder"
    if not path.is_dir():
        return "not a folder"
    if not (path / NORMALIZED).is_dir() and not (path / INDEX_FILE).is_file():
        return (f"not a normalized store (no {NORMALIZED}/ or {INDEX_FILE} in it); "
                "make one with 'benchcheck videos normalize'")
    return None


def video_dir(store: str | Path, video_id: str) -> Path:
    """The folder of one normalized video; refuses ids that would leave the store."""
    if not video_id or any(c in video_id for c in "/\\\x00") or video_id in (".", "..") or video_id[0] == ".":
        raise ValueError(f"video_id {video_id!r} is not a safe folder name")
    return Path(store) / NORMALIZED / video_id


def video_path(store: str | Path, video_id: str) -> Path:
    return video_dir(store, video_id) / VIDEO_FILE


@dataclass(frozen=True, slots=True)
class VideoMeta:
    """What ``meta.json`` says about a normalized video.

    ``timestamps[i]`` is stored frame i's time in seconds from the first frame (frame i is the
    i-th in presentation order); ``fps`` the stored rate; ``too_short`` marks videos with 32
    stored frames or fewer. ``source`` and ``normalizer`` record where the video came from and
    how it was made.
    """

    content_hash: str
    width: int
    height: int
    duration: float
    fps: float
    n_frames: int
    timestamps: list[float]
    too_short: bool
    source: dict[str, Any] = field(default_factory=dict)
    normalizer: dict[str, Any] = field(default_factory=dict)
    schema_version: int = META_SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _first(d: dict[str, Any], *names: str) -> Any:
    for n in names:
        if d.get(n) is not None:
            return d[n]
    return None


def meta_from_json(d: dict[str, Any], content_hash: str) -> VideoMeta:
    """A :class:`VideoMeta` from a ``meta.json`` object (ours or the original runs' field names)."""
    ts = _first(d, "timestamps", "frame_timestamps", "timestamps_s", "ts")
    if not isinstance(ts, list) or not ts:
        raise ValueError("meta.json has no frame timestamps")
    timestamps = [float(t) for t in ts]
    width, height = _first(d, "width", "stored_width", "w"), _first(d, "height", "stored_height", "h")
    if width is None or height is None:
        res = _first(d, "resolution", "size")
        if isinstance(res, list | tuple) and len(res) == 2:
            width, height = res
    if width is None or height is None:
        raise ValueError("meta.json has no width/height")
    n = int(_first(d, "n_frames", "frame_count", "num_frames", "n_stored") or len(timestamps))
    # Frame i's time is timestamps[i]: with fewer, the plans silently left the last frames out of
    # every grid; with more, they picked frames the video does not have.
    if n != len(timestamps):
        raise ValueError(f"meta.json lists {len(timestamps)} timestamps for its {n} frames")
    duration = _first(d, "duration", "duration_s")
    fps = _first(d, "fps", "stored_fps")
    too_short = _first(d, "too_short")
    return VideoMeta(
        content_hash=str(d.get("content_hash") or content_hash),
        width=int(width), height=int(height),
        duration=float(duration) if duration is not None else timestamps[-1],
        fps=float(fps) if fps is not None else 0.0,
        n_frames=n, timestamps=timestamps,
        too_short=bool(too_short) if too_short is not None else n <= TOO_SHORT_FRAMES,
        source=dict(d.get("source") or {}), normalizer=dict(d.get("normalizer") or {}),
        schema_version=int(d.get("schema_version") or 0),
    )


def read_meta(store: str | Path, video_id: str) -> VideoMeta:
    """The meta of one normalized video; ``ValueError`` (naming the file) when unreadable."""
    path = video_dir(store, video_id) / META_FILE
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return meta_from_json(data, video_id)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from e
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from e


def normalized_ids(store: str | Path) -> list[str]:
    """The ids of every complete normalized video (its ``meta.json`` present), sorted."""
    root = Path(store) / NORMALIZED
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and (p / META_FILE).is_file())
