"""The body of ``benchcheck screen``: load, plan, run, report (kept out of the thin CLI)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.screen.context import make_context
from benchcheck.screen.engine_args import DEFAULT_WORKERS, EngineArgs, build_engine
from benchcheck.screen.frames import CacheFrames, FrameSource, StoreFrames
from benchcheck.screen.runner import RunConfig, append_run_log, run_step
from benchcheck.screen.steps import INTROS, STEPS, parse_chain
from benchcheck.shard import parse_shard


@dataclass(frozen=True, slots=True)
class ScreenArgs:
    item_paths: Sequence[str]
    step: int
    results: str
    engine: str
    model: str | None
    revision: str | None
    endpoints: Sequence[str]
    api_key_env: str | None
    device: str
    rules: str | None
    chain: str
    intro: str
    frames_root: str | None
    store: str | None
    keep_file: str | None
    bench: str | None
    limit: int | None
    workers: int | None
    batch_items: int | None
    shard: str | None
    columns: str | None
    plan_only: bool
    progress: bool
    max_unit: int = 20000
    gpus: int = 0


def frame_source(frames_root: str | None, store: str | None) -> FrameSource | None:
    if frames_root and store:
        raise ValueError("give --frames or --store, not both")
    if frames_root:
        return CacheFrames(frames_root)
    return StoreFrames(store) if store else None


def run_screen(a: ScreenArgs, load: Callable[..., Any], echo: Callable[[str], None]) -> int:
    """Exit code 0 when the step ran (errors are rows, reported), 2 on a precondition failure, 3 when
    the run stopped early because the engine was unreachable or refused the run (rerun to go on)."""
    steps = parse_chain(a.chain)
    if a.step not in steps:
        raise ValueError(f"step {a.step} is not in the chain {a.chain}")
    if a.intro not in INTROS:
        raise ValueError(f"unknown --intro {a.intro!r}; known: {', '.join(INTROS)}")
    shard = parse_shard(a.shard)
    loaded = load(a.item_paths, a.columns, a.plan_only)
    frames = frame_source(a.frames_root, a.store)
    ctx = make_context(loaded.items, a.results, steps, frames, a.keep_file,
                       a.bench.split(",") if a.bench else None, a.limit)
    if a.plan_only:
        for line in ctx.plan(a.step).lines(invalid=len(loaded.errors)):
            echo(line)
        return 0
    spec = STEPS[a.step]
    engine = build_engine(spec, EngineArgs(a.engine, a.model, a.revision, a.endpoints, a.device, a.rules,
                                           a.api_key_env))
    served = a.engine != "hf"
    # hf: two calls in flight, so the next call's frames are decoded while the device runs this
    # one (the engine runs one forward at a time; docs/PERFORMANCE.md, end to end).
    cfg = RunConfig(step=a.step, intro=INTROS[a.intro],
                    workers=a.workers or (DEFAULT_WORKERS[a.step] if served else 2),
                    batch_items=a.batch_items or (1 if served else 16), shard=shard, progress=a.progress,
                    max_unit=a.max_unit)
    started = time.time()

    async def go() -> Any:
        try:
            return await run_step(ctx, engine, frames, cfg, echo)
        finally:
            await engine.aclose()

    summary = asyncio.run(go())
    append_run_log(Path(a.results), summary, cfg, engine, list(a.endpoints), started, a.gpus)
    for line in summary.bench_lines():
        echo(line)
    echo(f"step {a.step} shard {shard[0]}/{shard[1]}: {summary.ok} ok, {summary.removed} removed, "
         f"{summary.error_rows} error rows, {summary.failed} failed, {summary.missing_frames} new missing-frame "
         f"failures, {summary.wall_s:.1f}s ({summary.ok / max(summary.wall_s, 1e-9):.1f} items/s)")
    return 3 if summary.aborted else 0
