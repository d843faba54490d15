"""Fixtures of the video tests: small real mp4 files (made with PyAV) and a normalized store."""

from __future__ import annotations

from pathlib import Path

import pytest
from video_helpers import SOURCES, make_sources

from benchcheck.video.store import NormalizeReport, normalize_videos


@pytest.fixture(scope="session")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of test sources (see ``video_helpers.SOURCES``), broken files included."""
    return make_sources(tmp_path_factory.mktemp("sources"))


@pytest.fixture(scope="session")
def normalized(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, NormalizeReport]:
    """The sources normalized once (in-process) into a store shared by read-only tests."""
    store = tmp_path_factory.mktemp("store")
    return store, normalize_videos([sources], store, workers=1)


@pytest.fixture(scope="session")
def store(normalized: tuple[Path, NormalizeReport]) -> Path:
    return normalized[0]


@pytest.fixture(scope="session")
def ids(normalized: tuple[Path, NormalizeReport]) -> dict[str, str]:
    """Source file name -> video_id of every stored source."""
    _, report = normalized
    out = {Path(o.path).name: o.content_hash for o in report.outcomes if o.content_hash}
    assert set(out) == {name for name, spec in SOURCES.items() if spec is not None}
    return {k: v for k, v in out.items() if v}
