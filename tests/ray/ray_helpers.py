"""Helpers for the Ray executor tests: the runs themselves are ``benchmarks.shared.runs`` (the
benchmarks use them too); here what only the tests look at."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.shared.runs import (
    RULES,
    SWEEP_RULES,
    TIMING,
    make_pool,
    ok_rows,
    run_step,
    run_sweep,
    sweep_rows,
    write_rules,
    write_sweep_rules,
)

from benchcheck.store import read_rows

__all__ = ["RULES", "SWEEP_RULES", "TIMING", "make_pool", "ok_rows", "run_step", "run_sweep", "sweep_rows",
           "write_rules", "write_sweep_rules"]

# Set while ray_local's Ray starts, so its workers inherit them (test_ray_secrets): a variable of a
# name the user chose for --api-key-env, a secret-named one, and a plain one.
RAY_INHERITED = ("BC_CHOSEN_NAME", "BC_TEST_API_KEY", "BC_PLAIN")


def decisions(step_dir: Path) -> dict[str, tuple[Any, ...]]:
    """What must not depend on the executor: removed, the letter log-probs, the picks, the frames."""
    return {i: (r["removed"], json.dumps(r["lp"]), json.dumps(r.get("picks", r.get("pick"))),
                json.dumps(r.get("frames")), r["config_hash"])
            for i, r in ok_rows(step_dir).items()}


def n_rows(step_dir: Path) -> int:
    return sum(1 for p in step_dir.glob("*.jsonl") for _ in read_rows(p))


def engine_actor_pids() -> list[int]:
    """Processes of this user whose title names the engine stage's actor class."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"_EngineActor" in cmd and int(d.name) != os.getpid():
                pids.append(int(d.name))
    return pids


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def raw_keys(results: Path) -> Counter[tuple[str, str, str]]:
    """(bench, item_id, condition) of every raw line (p1_raw), counted."""
    out: Counter[tuple[str, str, str]] = Counter()
    for p in (results / "p1_raw").glob("*/*__DIAG_V.jsonl"):
        out.update((r["bench"], r["item_id"], r["condition"]) for r in read_rows(p))
    return out
