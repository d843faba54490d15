"""A screening step on this process: plan once, split into units, ``run_task`` each unit with the
screening adapter (the local executor's body; ``launch`` client shards and Slurm tasks run it too).

Resumable by construction: what is done is read back from the rows, so the same command run
again continues where a killed run stopped. Units held by another live process (their lease)
are skipped and reported, never worked twice at once.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchcheck.engines.base import Engine, engine_config_hash
from benchcheck.items import Item
from benchcheck.screen.context import ScreenContext, step_store
from benchcheck.screen.extra_perms import ExtraPerms
from benchcheck.screen.plan import StepPlan
from benchcheck.screen.steps import STEPS, IntroSet
from benchcheck.screen.task import ScoreTask, StepUnitBook, WorkUnit
from benchcheck.shard import WHOLE, ShardPath, format_shard, plan_units, shard_units
from benchcheck.spec import ModelRef, RunSpec
from benchcheck.store import append_rows
from benchcheck.unit_loop import POLICY, LoopOptions, Policy, StopState, TaskSummary, gather_to_end, run_task_async

Echo = Callable[[str], None]
UNITS_AT_ONCE = 4


@dataclass(frozen=True, slots=True)
class RunConfig:
    step: int
    intro: IntroSet
    workers: int = 4
    batch_items: int = 8
    shard: ShardPath = WHOLE
    max_unit: int = 20000
    progress: bool = True
    policy: Policy = POLICY
    extra: ExtraPerms | None = None  # --extra-perms: evidence for the audit, never the decision


@dataclass(slots=True)
class RunSummary:
    step: int
    attempted: int = 0
    ok: int = 0
    removed: int = 0
    error_rows: int = 0
    failed: int = 0
    stale: int = 0
    missing_frames: int = 0
    held_units: list[str] = field(default_factory=list)
    held_items: int = 0
    wall_s: float = 0.0
    aborted: bool = False  # stopped early: the engine was unreachable or refused the run
    per_bench: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, t: TaskSummary) -> None:
        if t.held:
            self.held_units.append(f"{t.unit} ({t.holder})" if t.holder else t.unit)
            self.held_items += t.held_items
            return
        self.attempted += t.attempted
        self.ok += t.ok
        self.removed += t.removed
        self.error_rows += t.error_rows
        self.failed += t.failed
        self.stale += t.stale
        self.aborted = self.aborted or t.aborted
        for b, c in t.per_group.items():
            self.per_bench.setdefault(b, Counter()).update(c)

    def bench_lines(self) -> list[str]:
        out = [f"{b}: done={c['ok']} removed={c['removed']} errors={c['errors']}"
               for b, c in sorted(self.per_bench.items())]
        if self.held_units:
            out.append(f"HELD_BY_OTHER={self.held_items} (units worked by another live process: "
                       f"{', '.join(self.held_units)})")
        return out


def step_run_spec(step: int, intro: IntroSet, engine: Engine) -> RunSpec:
    """The step's RunSpec for the model this engine answers as."""
    return STEPS[step].run_spec(intro, ModelRef(engine.model_name, engine.revision))


def record_missing_frames(results: Path, step: int, items: list[Item]) -> int:
    """Append missing-frame items to ``failures.jsonl`` once per (item, step): not error rows."""
    rows = [{"item_id": i.item_id, "bench": i.bench, "step": step, "video_id": i.video_id,
             "reason": "missing frame folder", "ts": round(time.time(), 3)} for i in items]
    return append_rows(results / "failures.jsonl", rows, unique_by=lambda r: (r.get("item_id"), r.get("step")))


def my_units(plan: StepPlan, shard: ShardPath, max_unit: int,
             basis: Mapping[str, Sequence[str]] | None = None) -> list[WorkUnit]:
    """This shard's units with their eligible items. Units are planned over ``basis``, every item
    of each benchmark (``ScreenContext.unit_basis``; default: the eligible items), not over the
    eligible or remaining ones: an item stays in one unit (its file and lease) however far the
    earlier steps got and whatever ``--limit`` a run had, and all shards agree. Units with no
    eligible item are left out."""
    work: dict[str, set[str]] = {b: set(ids) for b, ids in (basis or {}).items()}
    for it in plan.eligible:
        work.setdefault(it.bench, set()).add(it.item_id)
    units = plan_units([(b, sorted(ids)) for b, ids in sorted(work.items())], max_unit)
    mine = shard_units(units, shard)
    eligible = {(i.bench, i.item_id): i for i in plan.eligible}
    out = []
    for u in mine:
        items = tuple(eligible[(u.bench, i)] for i in u.ids if (u.bench, i) in eligible)
        if items:
            out.append(WorkUnit(plan.step, u.bench, u.part, u.n_parts, items))
    return out


def held_by_other(ctx: ScreenContext, plan: StepPlan, shard: ShardPath, max_unit: int) -> int:
    """Remaining items of this shard in units a live process holds now (``--plan-only``)."""
    todo = {i.item_id for i in plan.todo}
    store = step_store(ctx.results, plan.step)
    n = 0
    for u in my_units(plan, shard, max_unit, ctx.unit_basis()):
        if store.held(store.unit_path(u.bench, u.part, u.n_parts)):
            n += sum(1 for i in u.items if i.item_id in todo)
    return n


async def run_step(ctx: ScreenContext, engine: Engine, cfg: RunConfig, echo: Echo = print,
                   plan: StepPlan | None = None) -> RunSummary:
    """Run the remaining items of ``cfg.step`` for this shard; returns what happened. ``plan``: the
    caller's ``ctx.plan(step, include_own=False)``, when it has read it already."""
    t0 = time.time()
    spec = step_run_spec(cfg.step, cfg.intro, engine)
    store = step_store(ctx.results, cfg.step)
    store.write_spec(spec)
    plan = plan or ctx.plan(cfg.step, include_own=False)  # the earlier steps, read once; own rows: per unit
    summary = RunSummary(cfg.step)
    summary.missing_frames = record_missing_frames(ctx.results, cfg.step, plan.missing_frames)
    units = my_units(plan, cfg.shard, cfg.max_unit, ctx.unit_basis())
    # A few units at once, their engine calls sharing one limit: a unit's tail overlaps the next
    # unit's start, so the engine is never left idle between units.
    task = ScoreTask(spec, cfg.step, ctx.frames, cfg.extra)
    stop = StopState()  # one dead server stops every unit of the run
    opts = LoopOptions(workers=cfg.workers, items_per_call=cfg.batch_items, policy=cfg.policy,
                       calls=asyncio.Semaphore(max(1, cfg.workers)), stop=stop)
    slots = asyncio.Semaphore(UNITS_AT_ONCE)
    bar = _progress(sum(len(u.items) for u in units), f"step {cfg.step}", cfg.progress)

    async def one(u: WorkUnit) -> None:
        async with slots:
            if stop.stopped:
                summary.aborted = True
                return  # the engine is gone: leave the other units for the next run
            t = await run_task_async(task, StepUnitBook(spec, u, store, cfg.policy.max_errors), engine, opts, echo,
                                     bar, what=f"step {cfg.step}")
            summary.add(t)
            bar(len(u.items) - t.attempted, count_only=True)

    try:
        await gather_to_end([one(u) for u in units])  # on Ctrl-C too, every unit ends before the engine closes
    finally:  # closed on Ctrl-C too: its line ends before the "interrupted:" line, not under it
        bar(0, close=True)
    summary.wall_s = round(time.time() - t0, 3)
    return summary


def append_run_log(results: Path, summary: RunSummary, cfg: RunConfig, engine: Engine,
                   endpoints: list[str], started: float, gpus: int = 0) -> None:
    """One row per run of a step or shard: what ``pack`` and ``assemble`` report as accounting.
    ``shard`` / ``n_shards``: the outermost share (a launch host's share of its array), the numbers
    every row of one array agrees on; ``shard_spec``: the whole path (``i/n:j/m``)."""
    append_rows(results / "run_log.jsonl", [{
        "step": summary.step, "shard": cfg.shard[0][0], "n_shards": cfg.shard[0][1],
        "shard_spec": format_shard(cfg.shard), "host": socket.gethostname(),
        "started": round(started, 3), "ended": round(started + summary.wall_s, 3), "wall_s": summary.wall_s,
        "items_attempted": summary.attempted, "rows_added": summary.ok + summary.error_rows, "ok": summary.ok,
        "removed": summary.removed, "errors": summary.error_rows, "failed": summary.failed, "gpus": gpus,
        "engine": engine.name, "model": engine.model_name, "endpoints": endpoints,
        "engine_config_hash": engine_config_hash(engine),
        "held_units": len(summary.held_units),
    }])


def _progress(total: int, desc: str, enabled: bool) -> Callable[..., None]:
    """A bar over the shard's eligible items: worked ones tick as they settle, the rest (done
    earlier, or held by another process) when their unit is passed."""
    if not enabled or not total:
        return lambda n, close=False, count_only=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="item", file=sys.stderr, dynamic_ncols=True)

    def update(n: int, close: bool = False, count_only: bool = False) -> None:
        if n > 0:
            bar.update(n)
        if close:
            bar.close()

    return update


def echo_summary(summary: RunSummary, shard: ShardPath, echo: Echo, via: str = "",
                 refused: Sequence[str] = ()) -> None:
    """Each benchmark's line (``refused``: those of benchmarks no item of which loaded), then the
    step's (``via``: which executor, when not this process)."""
    for line in [*summary.bench_lines(), *refused]:
        echo(line)
    stale = f", {summary.stale} asked again (stale rows)" if summary.stale else ""
    echo(f"step {summary.step} shard {format_shard(shard)}{via}: {summary.ok} ok, {summary.removed} removed, "
         f"{summary.error_rows} error rows, {summary.failed} failed, {summary.missing_frames} new missing-frame "
         f"failures{stale}, {summary.wall_s:.1f}s ({summary.ok / max(summary.wall_s, 1e-9):.1f} items/s)")
