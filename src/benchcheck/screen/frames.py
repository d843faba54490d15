"""Where a visual step's 32-frame grid comes from: the frame cache, or the store on the fly."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from benchcheck import protocol
from benchcheck.video import plans
from benchcheck.video.cache import cached_files, frames_present, read_frames_json


class FrameSource(Protocol):
    """A source of each video's frame grid (the visual steps' ``v32`` plan), as JPEG bytes in grid order."""

    def available(self, video_id: str) -> bool: ...

    def grid(self, video_id: str) -> list[bytes]: ...


class CacheFrames:
    """``pool_frames/<video_id>/frame_<k>.jpg`` + ``frames.json`` (made by ``frames extract``, or a
    frame cache of the original runs).

    A folder counts only when it holds the whole grid (``plans.GRID32`` frames at
    ``plans.FRAME_LONG_SIDE`` px, JPEG ``protocol.JPEG_QUALITY``; fields that an older ``frames.json``
    lacks are not held against it): a ``mid``-only or sweep-sized cache is
    reported as missing frames, never sent as if it were the grid.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._ok: dict[str, bool] = {}

    def available(self, video_id: str) -> bool:
        if video_id not in self._ok:
            self._ok[video_id] = self._check(video_id)
        return self._ok[video_id]

    def _check(self, video_id: str) -> bool:
        if not frames_present(self.root, video_id):
            return False
        try:
            meta = read_frames_json(self.root, video_id)
            positions = {k for k, _ in cached_files(self.root, video_id)}
        except (OSError, ValueError, TypeError):
            return False
        return (meta.get("long_side", plans.FRAME_LONG_SIDE) == plans.FRAME_LONG_SIDE
                and meta.get("jpeg_quality", protocol.JPEG_QUALITY) == protocol.JPEG_QUALITY
                and set(range(plans.GRID32)) <= positions)

    def grid(self, video_id: str) -> list[bytes]:
        from benchcheck.video.cache import load_cached_positions

        return load_cached_positions(self.root, video_id, range(plans.GRID32))


class StoreFrames:
    """Extract the grid from the normalized store in memory: the same bytes the cache would hold."""

    def __init__(self, store: str | Path) -> None:
        self.store = Path(store)

    def available(self, video_id: str) -> bool:
        from benchcheck.video.meta import META_FILE, video_dir

        try:
            return (video_dir(self.store, video_id) / META_FILE).is_file()
        except ValueError:
            return False

    def grid(self, video_id: str) -> list[bytes]:
        from benchcheck.video.extract import extract_jpegs

        jpegs = list(extract_jpegs(self.store, video_id, "v32").jpegs)
        if len(jpegs) != plans.GRID32:
            raise ValueError(f"{video_id}: the v32 plan gave {len(jpegs)} frames, not {plans.GRID32}")
        return jpegs
