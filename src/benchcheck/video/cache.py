"""Frame cache layout: ``<root>/<video_id>/frame_<k>.jpg`` plus ``frames.json`` (the authority).

``k`` is the position in the plan's grid (for the 32-frame grid the middle frame is
``frame_16.jpg``), so a cache written by the original runs reads correctly. ``frames.json``:

.. code-block:: json

    {"video_id": "...", "plan": "v32", "long_side": 448, "short_side": null,
     "jpeg_quality": 85, "n_stored": 120, "positions": [0, 1, ...], "indices": [2, 6, ...],
     "timestamps": [1.0, 3.0, ...], "sizes": [[448, 252], ...],
     "files": ["frame_0.jpg", ...]}

fps plans add ``capped_ctx``, ``n_grid``, ``n_max``, ``n_frames_used`` and
``tokens_per_frame``; ``v_128`` plans add ``capped``. A folder is replaced whole (written
beside it, then renamed into place), so a reader never sees a half-written cache and a killed
writer leaves at most a ``.tmp-*`` folder that the next write clears.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcheck.atomic import clear_dead, swap_folder, write_json_atomic, writer_tag

FRAMES_JSON = "frames.json"
CACHE_SCHEMA_VERSION = 1


def frame_dir(root: str | Path, video_id: str) -> Path:
    """The folder of one video's frames; refuses ids that would leave the cache root."""
    if (not video_id or "/" in video_id or "\\" in video_id or video_id in (".", "..")
            or "\x00" in video_id or video_id.startswith(".")):
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


def cached_files(root: str | Path, video_id: str) -> list[tuple[int, str]]:
    """``(position, file name)`` of every cached frame in ``frames.json`` order.

    Uses ``files`` and ``positions`` when present; a ``frames.json`` without them (an older
    cache) falls back to the ``frame_<k>.jpg`` files in the folder, in order of k.
    """
    data = read_frames_json(root, video_id)
    files, positions = data.get("files"), data.get("positions")
    if isinstance(files, list) and isinstance(positions, list) and len(files) == len(positions):
        return [(int(k), str(name)) for k, name in zip(positions, files, strict=True)]
    if isinstance(positions, list):
        return [(int(k), f"frame_{int(k)}.jpg") for k in positions]
    found = []
    for p in frame_dir(root, video_id).glob("frame_*.jpg"):
        stem = p.stem[len("frame_"):]
        if stem.isdigit():
            found.append((int(stem), p.name))
    return sorted(found)


def _read(folder: Path, name: str) -> bytes:
    if Path(name).name != name or name.startswith("."):
        raise ValueError(f"{folder / FRAMES_JSON}: bad file name {name!r}")
    return (folder / name).read_bytes()


def load_cached_jpegs(root: Path, video_id: str) -> list[bytes]:
    """The cached JPEG bytes in position order (for the 32 grid, element 16 is the middle frame).

    Raises ``FileNotFoundError`` when the folder, its ``frames.json`` or a listed frame is missing.
    """
    folder = frame_dir(root, video_id)
    return [_read(folder, name) for _, name in cached_files(root, video_id)]


def load_cached_frame(root: Path, video_id: str, position: int) -> bytes:
    """The JPEG bytes at one grid position (``16`` = the middle frame of the 32 grid)."""
    return load_cached_positions(root, video_id, [position])[0]


def load_cached_positions(root: Path, video_id: str, positions: Sequence[int]) -> list[bytes]:
    """The JPEG bytes at ``positions``, in that order, ``frames.json`` read once (a grid's 32
    frames each reading it cost a screening step's host more than the frames themselves)."""
    folder = frame_dir(root, video_id)
    names = dict(cached_files(root, video_id))
    missing = [k for k in positions if k not in names]
    if missing:
        raise FileNotFoundError(f"{folder}: no frame at position {missing[0]}")
    return [_read(folder, names[k]) for k in positions]


def cache_satisfies(root: str | Path, video_id: str, wanted: dict[str, Any]) -> bool:
    """True when the cached folder already holds ``wanted`` (a ``frames.json`` object to write).

    Satisfied when the size target and JPEG quality are the same and every wanted position
    is cached with the same stored frame index (so a ``v32`` cache serves ``mid``), and every
    listed file exists.
    """
    if not frames_present(root, video_id):
        return False
    try:
        have = read_frames_json(root, video_id)
        same = all(have.get(k) == wanted.get(k) for k in ("long_side", "short_side", "jpeg_quality"))
        pairs = dict(zip(have.get("positions") or [], have.get("indices") or [], strict=False))
        if not same or any(pairs.get(k) != i for k, i in zip(wanted["positions"], wanted["indices"], strict=True)):
            return False
        return all((frame_dir(root, video_id) / name).is_file() for _, name in cached_files(root, video_id))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write_frames(root: str | Path, video_id: str, frames_json: dict[str, Any], jpegs: list[bytes]) -> Path:
    """Write one video's frames and ``frames.json`` (its ``files`` name them), replacing the folder whole."""
    files = frames_json["files"]
    if len(files) != len(jpegs):
        raise ValueError("one file name per JPEG")
    final = frame_dir(root, video_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    tag = writer_tag()
    tmp = final.parent / f".tmp-{video_id}-{tag}"
    tmp.mkdir()
    try:
        for name, data in zip(files, jpegs, strict=True):
            (tmp / name).write_bytes(data)
        # frames.json last, through the one atomic writer: the folder is renamed into place whole.
        write_json_atomic(tmp / FRAMES_JSON, {"schema_version": CACHE_SCHEMA_VERSION, **frames_json})
        swap_folder(tmp, final, final.parent / f".old-{video_id}-{tag}")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def clear_stale(root: str | Path) -> int:
    """Remove ``.tmp-*`` / ``.old-*`` folders left by killed writers whose process is gone."""
    return clear_dead(Path(root), (".tmp-", ".old-"))
