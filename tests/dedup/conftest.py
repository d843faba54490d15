"""Fixtures of the step-0 tests: the packaged embedding model (loaded once) and the item files."""

from __future__ import annotations

from pathlib import Path

import pytest
from dedup_fixtures import ALPHA, BETA, write_bench

from benchcheck.dedup import SentenceEmbedder, resolve_model


@pytest.fixture
def pool_files(tmp_path: Path) -> tuple[Path, Path]:
    items = tmp_path / "items"
    items.mkdir()
    return write_bench(items / "alpha.jsonl", ALPHA), write_bench(items / "beta.jsonl", BETA)


@pytest.fixture(scope="session")
def minilm() -> SentenceEmbedder:
    return SentenceEmbedder(resolve_model("minilm"), device="cpu", batch_size=32)
