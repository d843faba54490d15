"""Small screening and sweep runs in this process, for tests and benchmarks: a demo pool with real
frames, a scripted engine's rules, one step through the screen CLI's body (``run_screen_job``), one
``sweep run`` through its body (``run_sweep_job``), and their rows read back with the checks every
caller wants (one ok row per item, one CSV row per cell, no torn line)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from benchcheck.cli.common import load_items_reporting
from benchcheck.demo.items import write_demo_items
from benchcheck.demo.videos import make_demo_videos, store_and_cache
from benchcheck.executors.registry import run_screen_job as run_job
from benchcheck.screen.job import ShardJob
from benchcheck.store import read_rows
from benchcheck.video.plans import TOKEN_BUDGET

RULES: list[dict[str, Any]] = [
    {"match": "Question: What color.*\nOptions:\nA\\. red", "letters": {"A": -0.05, "B": -4, "C": -4.5, "D": -5}},
    {"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3, "E": -3.0}},
]


def make_pool(root: Path) -> tuple[Path, Path]:
    """Demo items over two real videos (PyAV), their frame cache; returns (items, frames)."""
    frames = root / "pool_frames"
    ids = store_and_cache(make_demo_videos(root / "videos", n=2), root / "store", frames)
    write_demo_items(root / "items", video_ids=ids)
    return root / "items", frames


def write_rules(path: Path, delay_s: float = 0.0, base: list[dict[str, Any]] = RULES) -> Path:
    rules: list[dict[str, Any]] = list(base)
    if delay_s:
        rules.insert(0, {"match": "", "delay_s": delay_s})
    path.write_text(json.dumps(rules))
    return path


def run_step(items: Path, results: Path, step: int, executor: str, frames: Path | None = None,
             engine: str = "scripted", rules: Path | None = None, model: Path | None = None, limit: int | None = None,
             address: str | None = None, batch_items: int | None = None, workers: int | None = None,
             extra_perms: int = 0, endpoints: tuple[str, ...] = (), expect: int = 0,
             revision: str | None = None) -> list[str]:
    """One step through ``run_job`` (the screen CLI's body) in this process; returns its lines."""
    lines: list[str] = []
    job = ShardJob(items=(str(items),), results=str(results), step=step, engine=engine,
                   model=str(model) if model else None, rules=str(rules) if rules else None, device="cpu",
                   frames_root=str(frames) if frames else None, limit=limit, progress=False, executor=executor,
                   ray_address=address, batch_items=batch_items, workers=workers, extra_perms=extra_perms,
                   endpoints=endpoints, revision=revision)
    code = run_job(job, lambda *a: load_items_reporting(a[0], a[1], True), lines.append)
    assert code == expect, lines
    return lines


def ok_rows(step_dir: Path) -> dict[str, dict[str, Any]]:
    """item_id -> its ok row; asserts there is exactly one ok row per item and no torn line."""
    rows = []
    for p in sorted(step_dir.glob("*.jsonl")):
        for line in p.read_bytes().split(b"\n"):
            if line.strip():
                json.loads(line)  # a torn line raises
        rows += [r for r in read_rows(p) if r.get("status", "ok") == "ok"]
    counts = Counter(r["item_id"] for r in rows)
    assert not [i for i, n in counts.items() if n > 1], "duplicate ok rows"
    return {r["item_id"]: r for r in rows}


# The reply depends on the frames received, so a wrong frame set shows in the rows.
SWEEP_RULES: list[dict[str, Any]] = [
    {"match": "", "images": {"count_min": 2}, "reply": "The answer is A."},
    {"match": "", "images": {"count_min": 1}, "reply": "(C)"},
    {"match": "", "reply": "B"},
]
TIMING = ("infer_s", "decode_s", "written_at")  # what may differ between two runs of the same cell


def write_sweep_rules(path: Path, delay_s: float = 0.0) -> Path:
    return write_rules(path, delay_s, SWEEP_RULES)


def run_sweep(items: list[Path], store: Path, results: Path, executor: str, conds: str, limit: int | None = None,
              engine: str = "scripted", rules: Path | None = None, model: str | None = None,
              workers: int | None = None, address: str | None = None, decode_workers: int | None = 0,
              token_budget: int | None = None, revision: str | None = None, endpoints: tuple[str, ...] = (),
              expect_aborted: bool = False) -> list[str]:
    """``sweep run`` through its CLI body (``executors.registry.run_sweep_job``) in this process; returns
    its lines. ``decode_workers`` 0: the local runner decodes in a thread (tests); None: its default
    pool (Ray refuses the flag: its CPU actors decode)."""
    from benchcheck.executors.registry import run_sweep_job
    from benchcheck.items import load_items
    from benchcheck.sweep.engine import SweepEngine
    from benchcheck.sweep.job import SweepArgs
    from benchcheck.sweep.results import SweepPaths

    lines: list[str] = []
    args = SweepArgs(load_items(items).items, str(store), SweepPaths.under(results), conds, limit=limit,
                     engine=SweepEngine(engine, model=model, revision=revision, endpoints=endpoints,
                                        rules=str(rules) if rules else None, device="cpu"),
                     workers=workers, decode_workers=decode_workers if executor == "local" else None,
                     progress=False, executor=executor, ray_address=address,
                     token_budget=token_budget or TOKEN_BUDGET)
    summary = run_sweep_job(args, lines.append)
    assert summary.aborted == expect_aborted, lines
    return lines


def sweep_rows(results: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """(bench, item_id, condition) -> its CSV row without timing; asserts one row per key."""
    from benchcheck.sweep.results import CSV_NAME, read_csv

    rows = read_csv(results / CSV_NAME)
    keys = Counter((r["bench"], r["item_id"], r["condition"]) for r in rows)
    assert not [k for k, n in keys.items() if n > 1], "duplicate CSV rows"
    return {(r["bench"], r["item_id"], r["condition"]): {k: v for k, v in r.items() if k not in TIMING} for r in rows}
