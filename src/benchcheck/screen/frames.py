"""Where a visual step's 32-frame grid comes from: the frame cache, or the store on the fly."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from benchcheck.video.cache import frames_present


class FrameSource(Protocol):
    """A source of each video's 32-frame grid at 448 px, as JPEG bytes in grid order."""

    def available(self, video_id: str) -> bool: ...

    def grid(self, video_id: str) -> list[bytes]: ...


class CacheFrames:
    """``pool_frames/<video_id>/frame_<k>.jpg`` + ``frames.json`` (made by ``frames extract`` or the origin)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def available(self, video_id: str) -> bool:
        return frames_present(self.root, video_id)

    def grid(self, video_id: str) -> list[bytes]:
        from benchcheck.video.cache import load_cached_jpegs

        return load_cached_jpegs(self.root, video_id)


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

        return list(extract_jpegs(self.store, video_id, "v32").jpegs)
