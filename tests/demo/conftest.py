"""Fixtures of the demo tests: the known-kind benchmarks (real PyAV clips, the normalized store
and the 32-frame cache), built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def known(tmp_path_factory: pytest.TempPathFactory) -> object:
    from benchcheck.demo.run import prepare_benchmarks

    return prepare_benchmarks(tmp_path_factory.mktemp("known"))


@pytest.fixture(scope="session")
def known_root(known: object) -> Path:
    from benchcheck.demo.run import Benchmarks

    assert isinstance(known, Benchmarks)
    return known.frames.parent.parent
