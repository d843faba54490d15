"""A screening job for one shard (``ShardJob``) and its body: load, plan, run, report.

``screen`` builds a job from its flags; ``launch`` writes one job file per client shard and starts
``benchcheck task run JOB`` (a process of its own, for isolation), and both end in ``run_job``,
which calls ``run_task`` per unit. No part of the program builds ``screen`` argument strings.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from benchcheck.engines.capabilities import concurrent_calls, local_gpus
from benchcheck.engines.options import EngineFlags, EngineOptions
from benchcheck.screen.context import ScreenContext, make_context
from benchcheck.screen.engine_args import DEFAULT_CALL_ITEMS, DEFAULT_WORKERS, build_engine
from benchcheck.screen.extra_perms import ExtraPerms
from benchcheck.screen.frames import CacheFrames, FrameSource, StoreFrames
from benchcheck.screen.plan import UNREACHED, WHY
from benchcheck.screen.runner import (
    RunConfig,
    RunSummary,
    append_run_log,
    held_by_other,
    run_step,
)
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS, STEPS, parse_chain
from benchcheck.shard import parse_shard

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardJob(EngineFlags):
    """One step for one shard: the items, where rows go, the engine (``EngineFlags``), the filters.
    Serializable (``launch`` hands it to a client process as a file); it never holds a secret, only
    the name of the environment variable that does."""

    items: tuple[str, ...]
    results: str
    step: int
    chain: str = "1,2,3,4,5,6"
    intro: str = DEFAULT_INTRO
    frames_root: str | None = None
    store: str | None = None
    videos: str | None = None  # the folder the items' video paths are relative to (video.resolve)
    keep_file: str | None = None
    bench: str | None = None
    limit: int | None = None
    workers: int | None = None  # served: requests in flight per endpoint; hf: engine calls in flight
    batch_items: int | None = None
    shard: str | None = None
    columns: str | None = None
    progress: bool = True
    max_unit: int = 20000
    gpus: int = 0
    extra_perms: int = 0
    extra_band: float = 1.0
    letter_tokenizer: str | None = None
    executor: str = "local"  # local | ray (docs/ray.md)
    ray_address: str | None = None  # ray: auto | HOST:PORT; None starts a local Ray

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> ShardJob:
        known = {f.name for f in fields(ShardJob)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"job file: unknown fields {', '.join(unknown)}")
        d = {**d, "items": tuple(d.get("items", ())), "endpoints": tuple(d.get("endpoints", ())),
             "hf_config": tuple(d.get("hf_config", ()))}
        return ShardJob(**d)

    def write(self, path: Path) -> Path:
        from benchcheck.atomic import write_json_atomic

        write_json_atomic(path, self.to_json(), indent=1)
        return path

    @staticmethod
    def read(path: str | Path) -> ShardJob:
        try:
            return ShardJob.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"{path}: not a job file: {e}") from None


def frame_source(frames_root: str | None, store: str | None) -> FrameSource | None:
    """The frame cache when given (the store then only names the videos), else the store on the fly.
    A folder that does not exist is a usage error: every visual item would be a missing frame."""
    for flag, folder in (("--frames", frames_root), ("--store", store)):
        if folder is not None and not Path(folder).is_dir():
            raise ValueError(f"{flag} {folder}: no such folder (made by 'benchcheck "
                             f"{'frames extract' if flag == '--frames' else 'videos normalize'}')")
    if frames_root:
        return CacheFrames(frames_root)
    return StoreFrames(store) if store else None


def job_context(job: ShardJob, load: Callable[..., Any], quiet: bool = False) -> tuple[ScreenContext, int]:
    """The job's items (their videos resolved: ``video.resolve``) and step states (their context),
    and how many items were invalid."""
    from benchcheck.video.resolve import needs_resolving, report_unresolved, resolve_items

    steps = parse_chain(job.chain)
    if job.step not in steps:
        raise ValueError(f"step {job.step} is not in the chain {job.chain}")
    if job.intro not in INTROS:
        raise ValueError(f"unknown --intro {job.intro!r}; known: {', '.join(INTROS)}")
    if job.videos is not None and not Path(job.videos).is_dir():
        raise ValueError(f"--videos {job.videos}: no such folder")
    frames = frame_source(job.frames_root, job.store)
    loaded = load(job.items, job.columns, quiet)
    items = loaded.items
    if STEPS[job.step].visual and (job.videos or needs_resolving(items)):
        resolved = resolve_items(items, job.store, job.videos)
        if not quiet:
            report_unresolved(resolved, _stderr)
        items = resolved.items
    ctx = make_context(items, job.results, steps, frames, job.keep_file,
                       job.bench.split(",") if job.bench else None, job.limit)
    return ctx, len(loaded.errors)


def _stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr)


def plan_lines(job: ShardJob, load: Callable[..., Any], quiet: bool = False,
               why: Echo | None = None) -> list[str]:
    """``REMAINING_TOTAL=<n>`` and the other counts of the job's step, read once, in-process;
    ``why`` gets one sentence per cause that leaves items out (kept off the KEY=VALUE lines)."""
    shard = parse_shard(job.shard)
    ctx, invalid = job_context(job, load, quiet)
    plan = ctx.plan(job.step)
    if why is not None:
        for line in plan.why_lines():
            why(line)
    return plan.lines(invalid=invalid, held=held_by_other(ctx, plan, shard, job.max_unit))


def engine_options(job: ShardJob, with_key: bool = True) -> EngineOptions:
    """The job's engine options: served, ``workers`` requests in flight per endpoint."""
    workers = (job.workers or DEFAULT_WORKERS[job.step]) if job.endpoints else None
    return job.options(workers, letter_tokenizer=job.letter_tokenizer, with_key=with_key)


def run_job(job: ShardJob, load: Callable[..., Any], echo: Echo, plan_only: bool = False) -> int:
    """Exit code 0 when the step ran (errors are rows, reported), 2 on a precondition failure, 3 when
    the run stopped early because the engine was unreachable or refused the run (rerun to go on)."""
    if plan_only:
        for line in plan_lines(job, load, why=lambda line: _stderr(f"why: {line}")):
            echo(line)
        return 0
    shard = parse_shard(job.shard)
    ctx, _ = job_context(job, load)
    if STEPS[job.step].visual and ctx.frames is None and any(i.video_id for i in ctx.items):
        raise ValueError(f"step {job.step} shows frames: give --frames DIR (made by 'benchcheck frames extract "
                         "--plan v32') or --store DIR (made by 'benchcheck videos normalize')")
    first = ctx.plan(job.step, include_own=False)  # the earlier steps only: nothing is eligible -> why
    if first.cannot_run:
        for line in first.why_lines():
            echo(line)
        _stderr(f"error: step {job.step} has nothing it can run (the 'step {job.step}:' lines say why); "
                "nothing was done")
        return 2
    for line in first.why_lines(UNREACHED if first.todo else tuple(WHY)):
        echo(line if not first.todo else f"note: {line}")
    if job.executor == "ray":
        from benchcheck.executors.ray_job import run_job_ray

        return run_job_ray(job, ctx, shard, echo)
    engine = build_engine(job.engine, STEPS[job.step], engine_options(job))
    # Served: each endpoint gets ``workers`` requests in flight, so the runner keeps that many
    # single-item calls going per endpoint. In-process: engine calls in flight as the engine
    # says it can take them, and at least two, so the next call's frames are decoded while the
    # device runs this one (the hf engine runs one forward at a time; see decision 029).
    parallel = bool(job.endpoints) or concurrent_calls(engine) > 1
    workers = job.workers or (DEFAULT_WORKERS[job.step] if parallel else 2)
    cfg = RunConfig(step=job.step, intro=INTROS[job.intro], workers=workers * max(1, len(job.endpoints)),
                    batch_items=job.batch_items or (1 if parallel else DEFAULT_CALL_ITEMS[job.step]),
                    shard=shard, progress=job.progress,
                    max_unit=job.max_unit,
                    extra=ExtraPerms(job.extra_perms, job.extra_band) if job.extra_perms > 0 else None)
    started = time.time()

    async def go() -> Any:
        try:
            return await run_step(ctx, engine, cfg, echo, plan=first)
        finally:
            await engine.aclose()

    summary = asyncio.run(go())
    # launch and Slurm say how many GPUs serve a shard; a plain `screen` on an in-process CUDA
    # engine ran on its one device (recorded as 0, pack would call it a CPU run).
    gpus = job.gpus or (0 if job.endpoints else local_gpus(engine))
    append_run_log(Path(job.results), summary, cfg, engine, list(job.endpoints), started, gpus)
    echo_summary(summary, shard, echo)
    if first.todo and not summary.attempted and not summary.held_units and not summary.aborted:
        echo(f"step {job.step}: nothing left to run: the {len(first.todo)} eligible items are done or failed here")
    return 3 if summary.aborted else 0


def echo_summary(summary: RunSummary, shard: tuple[int, int], echo: Echo, via: str = "") -> None:
    """Each benchmark's line, then the step's (``via``: which executor, when not this process)."""
    for line in summary.bench_lines():
        echo(line)
    stale = f", {summary.stale} asked again (stale rows)" if summary.stale else ""
    echo(f"step {summary.step} shard {shard[0]}/{shard[1]}{via}: {summary.ok} ok, {summary.removed} removed, "
         f"{summary.error_rows} error rows, {summary.failed} failed, {summary.missing_frames} new missing-frame "
         f"failures{stale}, {summary.wall_s:.1f}s ({summary.ok / max(summary.wall_s, 1e-9):.1f} items/s)")

