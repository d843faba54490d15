"""Helpers for the screening tests: run the real CLI as a subprocess, read rows back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchcheck.store import read_rows

LETTER_RULES = [
    # Blind step: the model "knows" colour questions when red is shown first.
    {"match": "Question: What color.*\nOptions:\nA\\. red", "letters": {"A": -0.05, "B": -4, "C": -4.5, "D": -5}},
    {"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3, "E": -3.0}},
]


def write_rules(path: Path, rules: list[dict[str, Any]] | None = None, delay_s: float = 0.0) -> Path:
    rules = list(rules or LETTER_RULES)
    if delay_s:
        rules.insert(0, {"match": "", "delay_s": delay_s})
    path.write_text(json.dumps(rules))
    return path


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


def popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "benchcheck", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def ok_rows(step_dir: Path) -> dict[str, dict[str, Any]]:
    """item_id -> its ok row; asserts there is exactly one ok row per item."""
    rows = [r for p in sorted(step_dir.glob("*.jsonl")) for r in read_rows(p) if r.get("status", "ok") == "ok"]
    counts = Counter(r["item_id"] for r in rows)
    dup = [i for i, n in counts.items() if n > 1]
    assert not dup, f"duplicate ok rows: {dup[:5]}"
    return {r["item_id"]: r for r in rows}


def decisions(step_dir: Path) -> dict[str, tuple[Any, ...]]:
    """What must not depend on how a run was split or interrupted."""
    return {i: (r["removed"], json.dumps(r["lp"]), json.dumps(r.get("picks", r.get("pick"))))
            for i, r in ok_rows(step_dir).items()}


def torn_lines(step_dir: Path) -> int:
    n = 0
    for p in step_dir.glob("*.jsonl"):
        for line in p.read_bytes().split(b"\n"):
            if line.strip():
                try:
                    json.loads(line)
                except ValueError:
                    n += 1
    return n
