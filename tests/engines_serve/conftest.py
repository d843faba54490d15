"""Fixtures of the serve / openai-engine tests (helpers live in serve_fixtures.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_fixtures import SCRIPTED_RULES, cli_server


@pytest.fixture(scope="session")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("rules") / "rules.json"
    p.write_text(json.dumps(SCRIPTED_RULES))
    return p


@pytest.fixture
def scripted_server(rules_file: Path) -> Iterator[str]:
    """A fresh scripted server per test (rules with ``times`` keep per-process counters)."""
    with cli_server("--engine", "scripted", "--rules", str(rules_file), "--model", "judge",
                    "--max-model-len", "1000") as (url, _):
        yield url
