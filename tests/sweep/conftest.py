"""A small normalized store shared by the sweep tests (real mp4 files made with PyAV)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_helpers import stored_video

# video_id -> (stored frames, width, height): 16:9 long (fps2 over the cap), too short, stored at 480,
# a 100-frame video (fewer than 128) and a 720-stored one.
VIDEOS = {
    "long16x9": (640, 400, 224),
    "short20": (20, 320, 180),
    "s480": (40, 852, 480),
    "mid100": (100, 320, 180),
    "s720": (34, 1280, 720),
}


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep_store")
    for vid, (n, w, h) in VIDEOS.items():
        stored_video(root, vid, n, w, h)
    return root
