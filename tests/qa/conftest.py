"""Fixtures of the QA tests: small real mp4 clips and dataset files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import CLIP_FRAMES

from benchcheck.video.synth import make_test_video


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A videos folder with two small H.264 clips whose frames paint their own index."""
    root = tmp_path_factory.mktemp("clips")
    make_test_video(root / "a.mp4", n_frames=CLIP_FRAMES, fps=4.0, width=320, height=180)
    (root / "sub").mkdir()
    make_test_video(root / "sub" / "b.mp4", n_frames=CLIP_FRAMES, fps=4.0, width=320, height=180, seed=1)
    return root


@pytest.fixture
def write_dataset(tmp_path: Path) -> Callable[[list[Any]], Path]:
    def write(entries: list[Any]) -> Path:
        path = tmp_path / "dataset.json"
        path.write_text(json.dumps(entries), encoding="utf-8")
        return path

    return write
