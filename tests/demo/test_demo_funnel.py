"""The funnel per kind equals the construction's prediction, for several chains (in-process
reference engine on real clips through the real screening runner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_helpers import screen_chain

from benchcheck.demo.kinds import predicted_step
from benchcheck.demo.run import Benchmarks
from benchcheck.engines.rules.reference import ReferenceEngine


@pytest.mark.parametrize("chain", [(1, 2, 3, 4, 5, 6), (5,), (4,), (2, 6, 5)], ids=lambda c: "-".join(map(str, c)))
def test_funnel_matches_the_construction(known: Benchmarks, tmp_path: Path, chain: tuple[int, ...]) -> None:
    observed, predicted = screen_chain(known, ReferenceEngine(), chain, tmp_path / "results")
    assert observed == predicted


def test_predictions_say_what_the_issue_says() -> None:
    """The expectations themselves, in words (docs/demo.md): leaks go at step 1, single-frame
    items at step 2, ordered ones at step 3 and never at the shuffled step 5 on its own, brief
    events at step 3 (and at step 5 on its own), options-only items at step 4 on its own, and
    the tiny dot survives every screening step (its frames are 224 px on the short side)."""
    assert predicted_step("text_leak", (1, 2, 3, 4, 5, 6)) == 1
    assert predicted_step("static", (1, 2, 3, 4, 5, 6)) == 2
    assert predicted_step("ordered", (1, 2, 3, 4, 5, 6)) == 3
    assert predicted_step("ordered", (5,)) is None
    assert predicted_step("brief", (1, 2, 3, 4, 5, 6)) == 3
    assert predicted_step("brief", (5,)) == 5
    assert predicted_step("options_only", (4,)) == 4
    assert predicted_step("text_leak", (4,)) is None
    assert predicted_step("high_res", (1, 2, 3, 4, 5, 6)) is None
    assert predicted_step("duplicate", (1, 2, 3, 4, 5, 6)) == 0
    assert predicted_step("duplicate", (1, 2, 3, 4, 5, 6), dedup=False) == 2


def test_screen_cli_runs_the_reference_engine(known: Benchmarks, tmp_path: Path) -> None:
    """`benchcheck screen --engine reference` takes step 1's decisions and labels its rows."""
    import json
    import subprocess
    import sys

    items = known.frames.parent.parent / "items"
    cmd = [sys.executable, "-m", "benchcheck", "screen", "--items", str(items), "--step", "1", "--results",
           str(tmp_path / "r"), "--engine", "reference", "--bench", "DemoNeither", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "r" / "step1" / "DemoNeither.jsonl").read_text().splitlines()]
    kinds = {it.item_id: it.kind for it in known.items}
    removed = {r["item_id"] for r in rows if r["removed"]}
    blind = ("text_leak", "options_only")
    assert removed == {i for i, k in kinds.items() if i.startswith("DemoNeither_") and k in blind}
    assert {r["engine"] for r in rows} == {"reference"} and all(r["model"].startswith("reference:") for r in rows)
