"""A small sweep for the demo: the conditions the verdict needs, on the demo's benchmarks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchcheck.engines.base import Engine
from benchcheck.items import load_items
from benchcheck.sweep.analysis import BenchVerdict, Settings
from benchcheck.sweep.cli_run import plan, run_planned
from benchcheck.sweep.engine import SweepEngine, build_sweep_engine
from benchcheck.sweep.job import SweepArgs
from benchcheck.sweep.report import write_analysis
from benchcheck.sweep.results import SweepPaths

# The rungs the pixels and frames effects read (v_32 is the stored-resolution reuse source of
# s448), plus the blind and one-frame rungs that show what text and a single frame give.
DEMO_CONDS = "v_blind,v_1,v_8_s224,v_32,v_32_s168,v_32_s448,v_128_s224"
# The demo's benchmarks have 20-31 items: with so few items, even when no answer differs between
# two conditions, an honest bound on the gain is far wider than the default +-0.05 equivalence
# margin (and wider than 0.10), so the demo asks for a coarse "no effect" that such a benchmark can
# show (decision 136; docs/sweep.md, statistics).
DEMO_SETTINGS = Settings(margin=0.20)


@dataclass(frozen=True, slots=True)
class DemoSweep:
    files: dict[str, Path]  # the analysis files (csv, markdown, plots)
    verdicts: dict[str, BenchVerdict]  # bench -> its verdict and effects


def run_demo_sweep(item_paths: Sequence[str | Path], store: Path, out: Path, engine: SweepEngine,
                   echo: Callable[[str], None] = print, limit: int | None = None, conds: str = DEMO_CONDS,
                   instance: Engine | None = None, plots: bool = True) -> DemoSweep:
    """Sweep ``limit`` items per benchmark (all by default) on the engine, then analyze.

    Writes ``out/results/conditions_results.csv`` (+ raw, logs) and ``out/analysis/``; a rerun
    resumes. ``instance``: an engine the caller built and owns (else one from ``engine``).
    """
    loaded = load_items(item_paths)
    args = SweepArgs(loaded.items, str(store), SweepPaths.under(out / "results"), conds, limit=limit, engine=engine,
                     decode_workers=0, chunk=4, progress=False)
    cells, specs, benches = plan(args)
    eng = build_sweep_engine(engine) if instance is None else instance

    async def go() -> None:
        try:
            await run_planned(args, cells, specs, benches, eng, echo)
        finally:
            if instance is None:
                await eng.aclose()

    asyncio.run(go())
    files, analysis = write_analysis(out / "results", out / "analysis", DEMO_SETTINGS, plots=plots)
    return DemoSweep(files, {v.bench: v for v in analysis.verdicts})
