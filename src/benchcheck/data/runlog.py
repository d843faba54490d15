"""Read ``run_log.jsonl`` (one row per run of a step or shard) into per-stage timing (pure after I/O).

A row may lack any field; what is missing stays unknown instead of becoming zero. Wall time is
the union of the runs' ``[started, ended]`` intervals (parallel shards are not counted twice,
idle gaps between reruns are not counted); GPU time is each run's ``wall_s`` times its GPUs.
Items are the runs' ``ok`` counts (``items_attempted`` when no run has ``ok``), as
``screen.assemble`` counts them. A run that does not record its GPUs (``gpus`` missing) is
counted as one GPU, because the launcher runs one client shard per GPU; ``gpus_assumed`` says so.
A run that records ``"gpus": 0`` ran on CPUs: a stage whose runs all did is ``cpu`` and has no
items/s per GPU. A run that records no GPUs but its ``endpoints`` (a sweep on served engines) is
counted as one GPU per endpoint (one server per GPU, as ``launch`` lays them out), also assumed.

A sweep run writes one row per condition (the interval that condition's units ran in) and one row
for the whole run under the stage :data:`ALL_CONDITIONS`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.store import read_rows

# The stage of a sweep run's whole-run row: ``sweep.results.ALL_CONDITIONS`` (data reads tasks' files
# without importing tasks; tests/sweep/test_sweep_spine.py checks the two agree).
ALL_CONDITIONS = "all"


@dataclass(frozen=True, slots=True)
class StageTiming:
    """What the run log says about one step or condition."""

    runs: int
    wall_s: float | None
    gpu_s: float | None
    items: int | None
    rows_added: int | None
    engines: tuple[str, ...]
    models: tuple[str, ...] = ()
    gpus_assumed: bool = False
    cpu: bool = False

    @property
    def items_per_s_per_gpu(self) -> float | None:
        if not self.gpu_s or self.items is None:
            return None
        return self.items / self.gpu_s


def _time(v: Any) -> float | None:
    """Epoch seconds from a number or an ISO 8601 string (``Z`` allowed); None otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return None
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
        return t.timestamp()
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _n_gpus(v: Any) -> int | None:
    """The recorded GPU count (0: a CPU run); None when the row does not say."""
    if isinstance(v, list | tuple):
        return len(v)
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str) and v.strip():
        return len([g for g in v.split(",") if g.strip()])
    return None


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def stage_key(row: Mapping[str, Any]) -> str | None:
    """``step1`` for ``{"step": 1}`` or ``{"step": "step1"}``; a condition name as given."""
    v = row.get("condition", row.get("step"))
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return f"step{v}"
    s = str(v)
    return f"step{s}" if s.isdigit() else s


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def summarize(rows: list[Mapping[str, Any]]) -> StageTiming:
    """One stage's runs → :class:`StageTiming`."""
    intervals, walls, gpu_s = [], [], []
    assumed = False
    recorded: list[int] = []
    for r in rows:
        s, e, w = _time(r.get("started")), _time(r.get("ended")), _num(r.get("wall_s"))
        if s is not None and e is not None and e >= s:
            intervals.append((s, e))
            w = e - s if w is None else w
        walls.append(w)
        g = _n_gpus(r.get("gpus"))
        if g is None:
            eps = r.get("endpoints")
            g, assumed = (len(eps) if isinstance(eps, list) and eps else 1), True
        else:
            recorded.append(g)
        gpu_s.append(w * g if w is not None else None)
    wall = union_seconds(intervals) if len(intervals) == len(rows) and rows else _sum(walls)
    items = _sum([_num(r.get("ok")) for r in rows])
    if items is None:
        items = _sum([_num(r.get("items_attempted")) for r in rows])
    added = _sum([_num(r.get("rows_added")) for r in rows])
    engines = tuple(sorted({str(r["engine"]) for r in rows if r.get("engine")}))
    models = tuple(sorted({str(r["model"]) for r in rows if r.get("model")}))
    cpu = bool(rows) and len(recorded) == len(rows) and sum(recorded) == 0
    return StageTiming(len(rows), wall, _sum(gpu_s), int(items) if items is not None else None,
                       int(added) if added is not None else None, engines, models, assumed, cpu)


def read_run_log(path: str | Path) -> dict[str, StageTiming] | None:
    """Per-stage timing from a run log; None when the file does not exist (unknown)."""
    p = Path(path)
    if not p.is_file():
        return None
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in read_rows(p):
        key = stage_key(row)
        if key is not None:
            groups.setdefault(key, []).append(row)
    return {k: summarize(v) for k, v in groups.items()}
