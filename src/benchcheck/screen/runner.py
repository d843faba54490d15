"""Run one screening step: plan, shard, ask the engine, append rows, retry errors.

Resumable by construction: what is done is read back from the rows, so the same command run
again continues where a killed run stopped. Rows of one item are appended whole, in one write.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.engines.base import Engine, Failure, LetterScores
from benchcheck.items import Item
from benchcheck.screen.context import ScreenContext, step_dir
from benchcheck.screen.extra_perms import ExtraPerms, attach, extra_requests, in_band
from benchcheck.screen.frames import FrameSource
from benchcheck.screen.requests import ItemRequests, build_item_requests
from benchcheck.screen.rows import REFUSED_STATUSES, RowContext, error_row, result_row
from benchcheck.screen.steps import STEPS, IntroSet, StepSpec, config_hash
from benchcheck.shard import assign_units, plan_units
from benchcheck.store import append_rows, unit_file

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class RunConfig:
    step: int
    intro: IntroSet
    workers: int = 4
    batch_items: int = 8
    shard: tuple[int, int] = (0, 1)
    max_unit: int = 20000
    progress: bool = True
    abort_after_unreachable: int = 8  # engine calls in a row that only met connection failures
    extra: ExtraPerms | None = None  # --extra-perms: evidence for the audit, never the decision


@dataclass(slots=True)
class RunSummary:
    step: int
    attempted: int = 0
    ok: int = 0
    removed: int = 0
    error_rows: int = 0
    failed: int = 0
    missing_frames: int = 0
    wall_s: float = 0.0
    aborted: bool = False  # stopped early: the engine was unreachable or refused the run
    per_bench: dict[str, Counter[str]] = field(default_factory=dict)

    def bench_lines(self) -> list[str]:
        return [f"{b}: done={c['ok']} removed={c['removed']} errors={c['errors']}"
                for b, c in sorted(self.per_bench.items())]


@dataclass(slots=True)
class _Progress:
    """Mutable bookkeeping of one run, shared by its workers (one event loop: no locks needed)."""

    pending: int  # items not settled yet (ok, out of retries, or left for the next run)
    unreachable_streak: int = 0
    aborted: bool = False
    refused: str | None = None  # the server refused the run itself (401/403/404): stop at once

    def settle(self, chunk: list[_Job], rows: list[dict[str, Any]], summary: RunSummary, max_errors: int,
               bar: Callable[..., None], echo: Echo) -> list[_Job]:
        """Count a chunk's rows; return the jobs to retry in this run. ``retry_free`` rows (server
        unreachable, key or model refused) are not retried here: a dead server would burn every
        retry at once. They are left for the next run and never use up an item's retries."""
        retry = []
        unreachable = all(r.get("error_kind") == "connection" for r in rows)
        self.unreachable_streak = self.unreachable_streak + 1 if unreachable else 0
        for job, row in zip(chunk, rows, strict=True):
            tally = summary.per_bench.setdefault(job.item.bench, Counter())
            if row["status"] == "ok":
                summary.ok += 1
                tally["ok"] += 1
                summary.removed += bool(row.get("removed"))
                tally["removed"] += bool(row.get("removed"))
            else:
                summary.error_rows += 1
                tally["errors"] += 1
                if row.get("retry_free"):
                    if row.get("error_status") in REFUSED_STATUSES and self.refused is None:
                        self.refused = str(row.get("error"))
                else:
                    job.errors += 1
                    if job.errors >= max_errors:
                        summary.failed += 1
                        echo(f"failed: {job.item.item_id} step {row['step']} after {job.errors} errors: "
                             f"{row['error']}")
                    else:
                        retry.append(job)
                        continue
            self.pending -= 1
            bar(1)
        return retry


@dataclass(slots=True)
class _Job:
    item: Item
    path: Path
    errors: int  # error rows this item already has


def record_missing_frames(results: Path, step: int, items: list[Item]) -> int:
    """Append missing-frame items to ``failures.jsonl`` once per (item, step): not error rows."""
    rows = [{"item_id": i.item_id, "bench": i.bench, "step": step, "video_id": i.video_id,
             "reason": "missing frame folder", "ts": round(time.time(), 3)} for i in items]
    return append_rows(results / "failures.jsonl", rows, unique_by=lambda r: (r.get("item_id"), r.get("step")))


def my_jobs(ctx: ScreenContext, spec: StepSpec, cfg: RunConfig, eligible: list[Item], todo: list[Item],
            errors: dict[str, int]) -> list[_Job]:
    """This shard's remaining items, each with the unit file its rows go to. Units are planned over
    every eligible item (not only the remaining ones) so all shards agree however far each got."""
    by_bench: dict[str, list[str]] = {}
    for it in eligible:
        by_bench.setdefault(it.bench, []).append(it.item_id)
    units = plan_units(sorted(by_bench.items()), cfg.max_unit)
    mine, _ = assign_units(units, cfg.shard[1], cfg.shard[0])
    todo_by_id = {i.item_id: i for i in todo}
    sdir = step_dir(ctx.results, spec.number)
    jobs = []
    for u in mine:
        path = unit_file(sdir, u.bench, u.part, u.n_parts)
        jobs += [_Job(todo_by_id[i], path, errors.get(i, 0)) for i in u.ids if i in todo_by_id]
    return jobs


async def run_step(ctx: ScreenContext, engine: Engine, frames: FrameSource | None, cfg: RunConfig,
                   echo: Echo = print) -> RunSummary:
    """Run the remaining items of ``cfg.step`` for this shard; returns what happened."""
    spec = STEPS[cfg.step]
    t0 = time.time()
    plan = ctx.plan(cfg.step)
    summary = RunSummary(cfg.step)
    summary.missing_frames = record_missing_frames(ctx.results, cfg.step, plan.missing_frames)
    state = ctx.states(cfg.step)[cfg.step]
    jobs = my_jobs(ctx, spec, cfg, plan.eligible, plan.todo, state.counted)
    row_ctx = RowContext(engine.model_name, engine.revision, engine.name,
                         config_hash(spec, cfg.intro, engine.model_name, engine.revision),
                         cfg.intro.name, socket.gethostname())
    intro = cfg.intro.for_step(spec)
    bar = _progress(len(jobs), f"step {cfg.step}", cfg.progress)
    queue: asyncio.Queue[list[_Job]] = asyncio.Queue()
    for k in range(0, len(jobs), cfg.batch_items):
        queue.put_nowait(jobs[k:k + cfg.batch_items])
    summary.attempted = len(jobs)
    run = _Progress(pending=len(jobs))

    async def worker() -> None:
        while run.pending > 0 and not run.aborted:
            try:
                chunk = queue.get_nowait()
            except asyncio.QueueEmpty:
                await asyncio.sleep(0.01)
                continue
            rows = await _score_chunk(spec, intro, chunk, engine, frames, row_ctx, cfg.extra)
            await asyncio.to_thread(_append_by_file, chunk, rows)
            retry = run.settle(chunk, rows, summary, state.max_errors, bar, echo)
            if run.unreachable_streak >= cfg.abort_after_unreachable and not run.aborted:
                run.aborted = True
                echo(f"step {cfg.step}: the engine is unreachable ({run.unreachable_streak} calls in a row); "
                     "stopping. Run the same command again to retry.")
            if run.refused and not run.aborted:
                run.aborted = True
                echo(f"step {cfg.step}: the server refused the run ({run.refused}); check --model and the "
                     "API key, then run the same command again. Stopping.")
            if retry:
                await asyncio.sleep(min(2.0, 0.2 * max(j.errors for j in retry)))
                queue.put_nowait(retry)

    await asyncio.gather(*(worker() for _ in range(max(1, cfg.workers))))
    bar(0, close=True)
    summary.wall_s = round(time.time() - t0, 3)
    summary.aborted = run.aborted
    return summary


def append_run_log(results: Path, summary: RunSummary, cfg: RunConfig, engine: Engine,
                   endpoints: list[str], started: float, gpus: int = 0) -> None:
    """One row per run of a step or shard: what ``pack`` and ``assemble`` report as accounting."""
    append_rows(results / "run_log.jsonl", [{
        "step": summary.step, "shard": cfg.shard[0], "n_shards": cfg.shard[1], "host": socket.gethostname(),
        "started": round(started, 3), "ended": round(started + summary.wall_s, 3), "wall_s": summary.wall_s,
        "items_attempted": summary.attempted, "rows_added": summary.ok + summary.error_rows, "ok": summary.ok,
        "removed": summary.removed, "errors": summary.error_rows, "failed": summary.failed, "gpus": gpus,
        "engine": engine.name, "model": engine.model_name, "endpoints": endpoints,
    }])


def _append_by_file(chunk: list[_Job], rows: list[dict[str, Any]]) -> None:
    by_file: dict[Path, list[dict[str, Any]]] = {}
    for job, row in zip(chunk, rows, strict=True):
        by_file.setdefault(job.path, []).append(row)
    for path, rs in by_file.items():
        append_rows(path, rs)


async def _score_chunk(spec: StepSpec, intro: str, chunk: list[_Job], engine: Engine,
                       frames: FrameSource | None, row_ctx: RowContext,
                       extra: ExtraPerms | None = None) -> list[dict[str, Any]]:
    """One engine call for a chunk of items; every item gets exactly one row back."""
    built: list[ItemRequests | str] = []
    for job in chunk:
        try:
            grid = None
            if spec.visual:
                if frames is None or not job.item.video_id:
                    raise ValueError("no frame source")
                grid = await asyncio.to_thread(frames.grid, job.item.video_id)
            built.append(build_item_requests(spec, intro, job.item, grid))
        except Exception as e:  # a broken frame folder is this item's error, never the run's
            built.append(f"frames: {type(e).__name__}: {e}")
    reqs = [r for b in built if isinstance(b, ItemRequests) for r in b.requests]
    try:
        answers: list[LetterScores | Failure] = await engine.score(reqs) if reqs else []
    except Exception as e:  # an engine bug must not lose the chunk: error rows, retried later
        answers = [Failure(r.request_id, "internal", f"{type(e).__name__}: {e}") for r in reqs]
    rows = []
    pos = 0
    for job, b in zip(chunk, built, strict=True):
        if isinstance(b, str):
            rows.append(error_row(spec, job.item, row_ctx, b))
            continue
        n = len(b.requests)
        rows.append(result_row(spec, b, row_ctx, answers[pos:pos + n]))
        pos += n
    if extra is not None and extra.n > 0:
        await _score_extra(spec, intro, [b for b in built if isinstance(b, ItemRequests)],
                           [r for b, r in zip(built, rows, strict=True) if isinstance(b, ItemRequests)], engine, extra)
    return rows


async def _score_extra(spec: StepSpec, intro: str, built: list[ItemRequests], rows: list[dict[str, Any]],
                       engine: Engine, extra: ExtraPerms) -> None:
    """The extra permutations of the chunk's items near the threshold, recorded into their rows."""
    near = [(extra_requests(spec, intro, b, extra.n), r) for b, r in zip(built, rows, strict=True)
            if in_band(r, extra.band)]
    reqs = [q for x, _ in near for q in x.requests]
    try:
        answers: list[LetterScores | Failure] = await engine.score(reqs) if reqs else []
    except Exception as e:  # the evidence is optional: its failure never costs the row
        answers = [Failure(q.request_id, "internal", f"{type(e).__name__}: {e}") for q in reqs]
    pos = 0
    for x, r in near:
        attach(r, x, answers[pos:pos + extra.n])
        pos += extra.n


def _progress(total: int, desc: str, enabled: bool) -> Callable[..., None]:
    if not enabled or not total:
        return lambda n, close=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="item", file=sys.stderr, dynamic_ncols=True)

    def update(n: int, close: bool = False) -> None:
        if n:
            bar.update(n)
        if close:
            bar.close()

    return update
