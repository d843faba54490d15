"""Fixtures of the hf engine tests (``tiny_model`` comes from tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchcheck.engines.hf.engine import HFEngine


@pytest.fixture(scope="session")
def hf_engine(tiny_model: Path) -> HFEngine:
    return HFEngine(tiny_model, device="cpu", max_batch_size=4)
