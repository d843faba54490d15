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
