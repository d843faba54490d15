"""Exports a lab feeds to its harness (audit-report): only items every step of the chain decided."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import RULES, cli

from benchcheck.store import load_state


@pytest.fixture(scope="module")
def step1_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo's items (each with a video) screened at step 1 only: the visual steps have not run."""
    root = tmp_path_factory.mktemp("half_run")
    items, res = root / "items", root / "results"
    assert cli("demo", "items", "--out", str(items)).returncode == 0
    rules = root / "rules.json"
    rules.write_text(json.dumps(RULES))
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(rules), "--no-progress")
    assert r.returncode == 0, r.stderr
    return items, res


def _exported(out: Path) -> set[str]:
    return {json.loads(line)["item_id"] for p in out.glob("*.jsonl") for line in p.read_text().splitlines()}


def test_export_without_frames_never_claims_items_the_visual_steps_have_not_screened(
        step1_only: tuple[Path, Path], tmp_path: Path) -> None:
    items, res = step1_only
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--out",
            str(tmp_path / "all"))
    assert r.returncode == 0, r.stderr
    # steps 2-6 never ran: nothing is kept yet, and the note says how many wait and why
    assert _exported(tmp_path / "all") == set()
    assert "items are neither kept nor removed" in r.stderr and "pending" in r.stderr
    # the chain actually run decides: step 1's survivors are kept
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--chain", "1",
            "--out", str(tmp_path / "one"))
    assert r.returncode == 0, r.stderr
    s1 = load_state(res / "step1")
    assert _exported(tmp_path / "one") == {i for i in s1.ok if not s1.is_removed(i)} != set()
