"""The bodies of ``benchcheck sweep run`` and ``dry-run`` (kept out of the thin CLI)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchcheck.engines.base import Engine
from benchcheck.engines.capabilities import concurrent_calls
from benchcheck.items import Item, fingerprints
from benchcheck.spec import RunSpec
from benchcheck.sweep.conditions import BLIND, condition_specs, parse_conditions
from benchcheck.sweep.engine import (
    DEFAULT_WORKERS_PER_ENDPOINT,
    MIN_CONTEXT,
    build_sweep_engine,
    check_context,
    engine_context,
    model_ref,
)
from benchcheck.sweep.frames import FramePool
from benchcheck.sweep.job import PreconditionError, SweepArgs
from benchcheck.sweep.outcome import Outcome, outcome
from benchcheck.sweep.pilot import pilot_benches, timing_table
from benchcheck.sweep.plan import Cell, dry_run_lines, plan_sweep
from benchcheck.sweep.results import log_line
from benchcheck.sweep.runner import RunnerConfig, SweepSummary, record_run_specs, sync_csv
from benchcheck.sweep.state import load_state, unsynced
from benchcheck.sweep.task import run_groups

Echo = Callable[[str], None]


def select_items(a: SweepArgs) -> tuple[list[Item], list[str]]:
    """Items of the chosen benchmarks (``--bench``, ``--pilot``), at most ``--limit`` each;
    ``PreconditionError`` when that leaves none (a run of nothing would report itself finished)."""
    present = sorted({i.bench for i in a.items})
    benches = present
    if a.bench:
        benches = [b.strip() for b in a.bench.split(",") if b.strip()]
        if not benches:
            raise PreconditionError(f"no items to sweep: --bench {a.bench!r} names no benchmark "
                                    f"(have {', '.join(present)})")
        unknown = [b for b in benches if b not in present]
        if unknown:
            raise PreconditionError(f"--bench: no items for {', '.join(unknown)} (have {', '.join(present)})")
    if a.pilot:
        benches = pilot_benches(benches)
    keep = set(benches)
    chosen = sorted((i for i in a.items if i.bench in keep and i.format == "mc"), key=lambda i: (i.bench, i.item_id))
    if a.limit is not None:
        per: dict[str, int] = {}
        out = []
        for i in chosen:
            per[i.bench] = per.get(i.bench, 0) + 1
            if per[i.bench] <= a.limit:
                out.append(i)
        chosen = out
    if not chosen:
        raise PreconditionError(f"no items to sweep: no multiple-choice item in {', '.join(benches) or 'the items'} "
                                "(an item of more options than letters is not swept)")
    return chosen, benches


def plan(a: SweepArgs) -> tuple[list[Cell], dict[str, RunSpec], list[str]]:
    specs = condition_specs(parse_conditions(a.conds), model_ref(a.engine), a.token_budget, a.max_images)
    items, benches = select_items(a)
    state = load_state(a.paths, specs, {i.bench for i in items}, fingerprints(items))
    return plan_sweep(items, specs, Path(a.store) if a.store else None, state), specs, benches


def dry_run(a: SweepArgs, echo: Echo) -> list[Cell]:
    """Print per bench x condition todo / NA / reuse / failures / gave up / stale / done and projected
    prompt tokens; a stale row (made under another spec) is to redo, with what changed."""
    cells, _, _ = plan(a)
    for line in dry_run_lines(cells):
        echo(line)
    behind = unsynced(a.paths).line(a.paths)
    if behind:
        echo(f"csv: {behind}")
    return cells


def planned(a: SweepArgs, echo: Echo) -> tuple[list[Cell], dict[str, RunSpec], list[str]] | None:
    """What every executor runs: the plan, or None (said on ``echo``) when nothing is left."""
    cells, specs, benches = plan(a)
    if not any(c.kind in ("todo", "na", "reuse", "failure") for c in cells):
        record_run_specs(specs, a.paths)  # the spec this run asked for is the one the CSV's readers pick
        caught_up = sync_csv(cells, a.paths)  # a run killed between its last row and that row's CSV row
        echo("nothing to do: every row is already written under the current spec"
             + (f" ({caught_up} rows caught up into {a.paths.csv.name})" if caught_up else ""))
        return None
    return cells, specs, benches


def run_outcome(a: SweepArgs) -> Outcome:
    """What the folder holds for the planned cells once a run is over (this run's rows and every
    earlier run's), whichever executor ran it."""
    cells, _, _ = plan(a)
    return outcome(cells)


def run(a: SweepArgs, echo: Echo) -> SweepSummary:
    """Plan and run in this process (the local executor; ``executors.registry.run_sweep_job`` picks
    the executor ``a.executor`` names)."""
    p = planned(a, echo)
    return SweepSummary() if p is None else run_local(a, *p, echo)


def run_local(a: SweepArgs, cells: list[Cell], specs: dict[str, RunSpec], benches: list[str],
              echo: Echo) -> SweepSummary:
    """Build the engine, check the context precondition, run (``PreconditionError`` first)."""
    engine = build_sweep_engine(a.engine)

    async def go() -> SweepSummary:
        try:
            return await run_planned(a, cells, specs, benches, engine, echo)
        finally:
            await engine.aclose()

    return asyncio.run(go())


def check_engine_context(a: SweepArgs, cells: Sequence[Cell], known: int | None, why: str | None = None) -> None:
    """``PreconditionError`` (logged) when the engine's context cannot hold the budget (``why``: why the
    engine did not tell it)."""
    visual = any(c.kind == "todo" and c.condition != BLIND for c in cells)
    problem = check_context(known, a.max_model_len, visual, a.token_budget, min_context=a.min_context, why=why)
    if visual and not problem and a.min_context < MIN_CONTEXT:
        log_line(a.paths, f"context floor lowered to {a.min_context:,} tokens by --min-context "
                          f"(engine: {known if known is not None else a.max_model_len} tokens)")
    if problem:
        log_line(a.paths, f"stopped: {problem}")
        raise PreconditionError(problem)


# Items per engine call for an in-process engine that runs one call at a time (hf): a real answer
# is a few tokens, and each decode step of a call costs the host as much for one row as for many,
# so a call of several items shares its decode steps (the engine plans long prompts apart).
SERIAL_CHUNK = 8
# Decoders' worth of items built ahead of a serial engine's call (decision 107): one unit's build
# (its slowest item's decode: seconds for a long video's frames) can outlast several short calls
# queued before it, so one decoders' worth left the device waiting at each such unit.
SERIAL_PREFETCH = 4
# Items built ahead at most, whatever the cores: their frames wait in memory (a long video's fps
# ladder holds hundreds of frames an item).
SERIAL_AHEAD_MAX = 64


@dataclass(frozen=True, slots=True)
class SweepCalls:
    """Units in flight and items per engine call (a unit is one call)."""

    workers: int
    chunk: int


def sweep_calls(a: SweepArgs, engine_calls: int, decoders: int = 0) -> SweepCalls:
    """Served engines: 6 units per endpoint (seed 001), one item each; an engine that runs several
    calls at once: that many units of one item; an in-process engine that runs one call at a time
    (``hf``): ``SERIAL_CHUNK`` items a call, and units enough that ``SERIAL_PREFETCH`` items per
    frame decoder (at most ``SERIAL_AHEAD_MAX``) are being built while one unit is on the device
    (a unit decodes its frames before its call: with one unit in flight the device would wait
    through every decode).
    ``--workers`` / ``--chunk`` win."""
    n_endpoints = len(a.engine.endpoints)
    serial = not n_endpoints and engine_calls <= 1
    chunk = a.chunk or (SERIAL_CHUNK if serial else 1)
    if a.workers:
        return SweepCalls(a.workers, chunk)
    if n_endpoints:
        return SweepCalls(DEFAULT_WORKERS_PER_ENDPOINT * n_endpoints, chunk)
    if not serial:
        return SweepCalls(engine_calls, chunk)
    ahead = min(SERIAL_PREFETCH * decoders, SERIAL_AHEAD_MAX)
    return SweepCalls(1 + max(1, -(-ahead // chunk)), chunk)


# Engines that answer by rules in this process, on the CPU (screen's run log records 0 GPUs for them too).
RULE_ENGINES = ("scripted", "reference", "reference-prior")


def run_gpus(a: SweepArgs) -> int | None:
    """GPUs behind the run, for the run log: none for the in-process rule engines (scripted,
    reference) or ``hf`` on the CPU, one for ``hf`` on ``cuda``; otherwise unknown (one per endpoint
    is assumed, as launch lays them out)."""
    if a.engine.engine in RULE_ENGINES or (a.engine.engine == "hf" and a.engine.device == "cpu"):
        return 0
    return 1 if a.engine.engine == "hf" and a.engine.device.startswith("cuda") else None


def after_run(a: SweepArgs, benches: Sequence[str], echo: Echo) -> None:
    if a.pilot:
        echo(f"pilot timing ({a.paths.timing}):")
        for line in timing_table(a.paths.timing, benches):
            echo(line)


async def run_planned(a: SweepArgs, cells: list[Cell], specs: dict[str, RunSpec], benches: list[str],
                      engine: Engine, echo: Echo) -> SweepSummary:
    """Run planned cells on an engine the caller owns (and closes)."""
    check_engine_context(a, cells, *engine_context(engine, a.engine))
    pool = FramePool(Path(a.store) if a.store else None, a.decode_workers,
                     (a.engine.api_key_env,) if a.engine.api_key_env else ())
    calls = sweep_calls(a, concurrent_calls(engine), pool.workers)
    cfg = RunnerConfig(workers=calls.workers, chunk=calls.chunk, progress=a.progress)
    log_line(a.paths, f"benches {','.join(benches)}; conditions {','.join(specs)}; decode workers {pool.workers}; "
                      f"units in flight {calls.workers}, {calls.chunk} items each")
    try:
        summary = await run_groups(cells, specs, engine, pool.frames, a.paths, cfg, echo, gpus=run_gpus(a),
                                  endpoints=a.engine.endpoints)
    finally:
        pool.close()
    after_run(a, benches, echo)
    return summary
