"""The README's first command: the main job end to end on the embedded demo.

Tiny random-weight models stand in for Qwen3-VL-8B and -2B (the same code path as the real ones),
so the decisions mean nothing; what the demo shows is the pipeline: items validated, videos
normalized, frames cut, steps 1-6 screened in-process, the pool assembled. Running it again
resumes (nothing left to do) and rebuilds the assembled outputs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from benchcheck.demo.items import write_demo_items
from benchcheck.demo.videos import make_demo_videos, store_and_cache
from benchcheck.engines.base import Engine
from benchcheck.items import load_items
from benchcheck.items.report import validation_table
from benchcheck.report.site import demo_report
from benchcheck.screen.assemble import assemble
from benchcheck.screen.context import ScreenContext, make_context
from benchcheck.screen.frames import CacheFrames
from benchcheck.screen.runner import RunConfig, append_run_log, run_step
from benchcheck.screen.steps import DEFAULT_CHAIN, DEFAULT_INTRO, INTROS, STEPS

Echo = Callable[[str], None]
TINY_SEEDS = {"8b": 0, "2b": 1}


def build_models(root: Path) -> dict[str, Path]:
    """Tiny stand-ins for the 8B and 2B models (different seeds), built once."""
    from benchcheck.engines.models import build_tiny_model

    out = {}
    for key, seed in TINY_SEEDS.items():
        d = root / f"tiny-qwen3-vl-{key}"
        if not (d / "config.json").is_file():
            build_tiny_model(d, seed=seed)
        out[key] = d
    return out


def run_demo(out: str | Path, echo: Echo = print, progress: bool = True) -> Path:
    """Run everything under ``out``; returns the results folder."""
    out = Path(out)
    echo("1/6 tiny models")
    models = build_models(out / "models")
    echo("2/6 demo videos -> normalized store -> 32-frame cache")
    frames_root = out / "frames" / "pool_frames"
    video_ids = store_and_cache(make_demo_videos(out / "videos"), out / "store", frames_root)
    echo("3/6 demo items")
    pool = write_demo_items(out / "items", video_ids=video_ids)
    loaded = load_items(pool.paths)
    echo(validation_table(loaded))
    echo(f"{len(loaded.errors)} bad items reported and skipped (see `benchcheck items validate {out / 'items'}`)")
    results = out / "results"
    frames = CacheFrames(frames_root)
    ctx = make_context(loaded.items, results, DEFAULT_CHAIN, frames, None)
    echo("4/6 screening steps 1-6 (in-process hf engine on the CPU)")
    asyncio.run(_screen_all(ctx, models, frames, echo, progress))
    echo("5/6 assemble")
    assembled = assemble(ctx)
    for flag in assembled.flags:
        echo(f"FLAG: {flag}")
    echo("6/6 outputs")
    for name, path in assembled.paths.items():
        echo(f"  {name}: {path}")
    echo(f"  rows: {results}/step<k>/<bench>.jsonl   report: {assembled.paths['summary_md']}")
    echo(f"  audit report (open in a browser): {demo_report(results, out / 'items', frames_root)}")
    return results


async def _screen_all(ctx: ScreenContext, models: dict[str, Path], frames: CacheFrames, echo: Echo,
                      progress: bool) -> None:
    from benchcheck.engines.hf import HFEngine

    engines: dict[str, Engine] = {k: HFEngine(p, device="cpu", served_name=p.name) for k, p in models.items()}
    try:
        for step in DEFAULT_CHAIN:
            spec = STEPS[step]
            cfg = RunConfig(step=step, intro=INTROS[DEFAULT_INTRO], workers=1, batch_items=16, progress=progress)
            started = time.time()
            summary = await run_step(ctx, engines[spec.model], frames, cfg, echo)
            append_run_log(ctx.results, summary, cfg, engines[spec.model], [], started)
            plan = ctx.plan(step)
            echo(f"step {step} {spec.name}: {summary.ok} screened now, {summary.removed} removed, "
                 f"{summary.error_rows} error rows; REMAINING_TOTAL={plan.remaining} "
                 f"NO_VIDEO={plan.counts['NO_VIDEO']} MISSING_FRAMES={plan.counts['MISSING_FRAMES']}")
    finally:
        for e in engines.values():
            await e.aclose()
