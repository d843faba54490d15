"""A screening job for one shard (``ShardJob``): the step, items, results, engine and filters, and
what every executor reads of it before it runs (the items and step states, the plan).

``screen`` builds a job from its flags; ``launch`` writes one job file per client shard and starts
``benchcheck task run JOB``; an executor (``executors/``, picked by name) runs it. No part of the
program builds ``screen`` argument strings, and nothing here knows which executor runs the job.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from benchcheck.engines.options import EngineFlags, EngineOptions
from benchcheck.items.load import LoadResult
from benchcheck.items.report import refused_benchmarks
from benchcheck.screen.context import ScreenContext, make_context
from benchcheck.screen.engine_args import DEFAULT_WORKERS
from benchcheck.screen.frames import CacheFrames, FrameSource, StoreFrames
from benchcheck.screen.plan import CAUSES, UNREACHED, StepPlan
from benchcheck.screen.runner import held_by_other
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS, STEPS, parse_chain
from benchcheck.shard import ShardPath, parse_shard_path
from benchcheck.video.folders import frames_refusal
from benchcheck.video.meta import store_problem

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
    executor: str = "local"  # a name in executors.registry (docs/ray.md)
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

    def dumps(self) -> bytes:
        """The job file's text, for a client that reads its job from stdin (pure)."""
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1).encode("utf-8") + b"\n"

    @staticmethod
    def read(path: str | Path) -> ShardJob:
        """The job in file ``path``, or on stdin for ``-``."""
        try:
            text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
            return ShardJob.from_json(json.loads(text))
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"{'stdin' if str(path) == '-' else path}: not a job file: {e}") from None


def frame_source(frames_root: str | None, store: str | None) -> FrameSource | None:
    """The frame cache when given (the store then only names the videos), else the store on the fly.
    A folder that does not exist, or that is a store or a folder of videos, is a usage error
    (``video.folders.frames_refusal``): every visual item would be a missing frame."""
    refused = None if frames_root is None else frames_refusal(frames_root)
    if refused:
        raise ValueError(refused)
    why = None if store is None else store_problem(store)
    if why:
        raise ValueError(f"--store {store}: {why}")
    if frames_root:
        return CacheFrames(frames_root)
    return StoreFrames(store) if store else None


def job_context(job: ShardJob, load: Callable[..., Any], quiet: bool = False) -> tuple[ScreenContext, LoadResult]:
    """The job's items (their videos resolved: ``video.resolve``) and step states (their context),
    and the load they came from (its problems)."""
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
                       [b.strip() for b in job.bench.split(",") if b.strip()] if job.bench else None, job.limit)
    return ctx, loaded


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def plan_lines(job: ShardJob, load: Callable[..., Any], quiet: bool = False,
               why: Echo | None = None) -> list[str]:
    """``REMAINING_TOTAL=<n>`` and the other counts of the job's step, read once, in-process;
    ``why`` gets one sentence per cause that leaves items out (kept off the KEY=VALUE lines)."""
    shard = parse_shard_path(job.shard)
    ctx, loaded = job_context(job, load, quiet)
    plan = ctx.plan(job.step)
    if why is not None:
        for line in [*refused_here(job, loaded), *plan.why_lines()]:
            why(line)
    return plan.lines(invalid=len(loaded.errors), held=held_by_other(ctx, plan, shard, job.max_unit))


def refused_here(job: ShardJob, loaded: LoadResult) -> list[str]:
    """The benchmarks of the job's item files that gave no item (``items.report.refused_benchmarks``),
    those its ``--bench`` names (all without one)."""
    wanted = {b.strip() for b in job.bench.split(",") if b.strip()} if job.bench else None
    return [line for line in refused_benchmarks(loaded) if wanted is None or line.split(":", 1)[0] in wanted]


def engine_options(job: ShardJob, with_key: bool = True) -> EngineOptions:
    """The job's engine options: served, ``workers`` requests in flight per endpoint."""
    workers = (job.workers or DEFAULT_WORKERS[job.step]) if job.endpoints else None
    return job.options(workers, letter_tokenizer=job.letter_tokenizer, with_key=with_key)


@dataclass(frozen=True, slots=True)
class ReadyJob:
    """A job whose items, step states and plan are read, and that has work it can run."""

    job: ShardJob
    ctx: ScreenContext
    shard: ShardPath
    first: StepPlan  # the earlier steps' plan (own rows are read per unit, under its lease)
    refused: tuple[str, ...] = ()  # benchmarks whose item files gave no item: the summary names them


def ready_job(job: ShardJob, load: Callable[..., Any], echo: Echo) -> ReadyJob | int:
    """What every executor does before it runs a job: read the items and the earlier steps, say
    why items are left out; exit code 2 (nothing can run) instead of a ready job, or a
    ``ValueError`` (a one-line usage error) when what was asked cannot happen."""
    shard = parse_shard_path(job.shard)
    ctx, loaded = job_context(job, load)
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
    for line in first.why_lines(UNREACHED if first.todo else CAUSES):
        echo(line if not first.todo else f"note: {line}")
    return ReadyJob(job, ctx, shard, first, tuple(refused_here(job, loaded)))


def print_plan(job: ShardJob, load: Callable[..., Any], echo: Echo) -> int:
    """``--plan-only`` on any executor: the counts on ``echo``, the causes on stderr."""
    for line in plan_lines(job, load, why=lambda line: _stderr(f"why: {line}")):
        echo(line)
    return 0
