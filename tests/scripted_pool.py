"""A small pool screened at step 1 by the scripted engine, for tests that need results at the
edges (a benchmark all removed, one of one item, one of error rows) without a model."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# The option text RIGHT at letter L gets the model's confident pick (the item is removed at step 1);
# any other prompt gets a flat, unsure answer.
RULES: list[dict[str, Any]] = [
    {"match": f"\n{letter}\\. RIGHT\\b", "letters": {letter: -0.01, **{o: -6.0 for o in "ABCD" if o != letter}}}
    for letter in "ABCD"] + [{"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3}}]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=300)


def screened(root: Path, benches: Mapping[str, Sequence[Mapping[str, Any]]],
             rules: Sequence[Mapping[str, Any]] = RULES) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """``root/items/<bench>.jsonl`` from ``benches``, screened at step 1 into ``root/results`` by the
    scripted engine with ``rules``: (items folder, results folder, the screen run)."""
    items = root / "items"
    items.mkdir()
    for name, rows in benches.items():
        (items / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "rules.json").write_text(json.dumps(list(rules)))
    res = root / "results"
    run = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
              "--rules", str(root / "rules.json"), "--no-progress")
    assert run.returncode == 0, run.stderr
    return items, res, run


def rescreened_in_part(root: Path) -> tuple[Path, Path]:
    """``root/items/mine.jsonl`` (8 items, golds 0-2) screened at step 1 whole by the reference
    engine, then again by the scripted engine (a flat answer, nothing removed) for its first 3
    items only: the reference engine's rows are stale under the new spec. (items, results)."""
    items, results = root / "items", root / "results"
    items.mkdir()
    with (items / "mine.jsonl").open("w") as f:
        for i in range(8):
            f.write(json.dumps({"item_id": f"q{i}", "question": f"What is {i}?", "options": ["a", "b", "c"],
                                "answer": i % 3}) + "\n")
    r = cli("screen", "--step", "1", "--items", str(items), "--results", str(results), "--engine", "reference",
            "--no-progress")
    assert r.returncode == 0, r.stderr
    rules = root / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -1.1, "B": -1.2, "C": -1.0}}]))
    r = cli("screen", "--step", "1", "--items", str(items), "--results", str(results), "--engine", "scripted",
            "--rules", str(rules), "--limit", "3", "--no-progress")
    assert r.returncode == 0, r.stderr
    return items, results
