"""A small sweep for the demo: a few items per benchmark, the conditions the verdict needs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from benchcheck.engines.base import Engine
from benchcheck.items import load_items
from benchcheck.sweep.cli_run import SweepArgs, plan, run_planned
from benchcheck.sweep.engine import SweepEngine, build_sweep_engine
from benchcheck.sweep.report import write_analysis
from benchcheck.sweep.results import SweepPaths

# The rungs the pixels and frames effects read (v_32 is the stored-480 reuse source of s448).
DEMO_CONDS = "v_blind,v_8_s224,v_32,v_32_s168,v_32_s448,v_128_s224"


def run_demo_sweep(item_paths: Sequence[str | Path], store: Path, out: Path, model: str | Path,
                   echo: Callable[[str], None] = print, limit: int = 3, conds: str = DEMO_CONDS,
                   engine: Engine | None = None) -> dict[str, Path]:
    """Sweep ``limit`` items per benchmark with the (tiny) model on the CPU, then analyze.

    Writes ``out/results/conditions_results.csv`` (+ raw, logs) and ``out/analysis/``; a rerun
    resumes. Returns the analysis files.
    """
    loaded = load_items(item_paths)
    opts = SweepEngine("hf", model=str(model), device="cpu")
    args = SweepArgs(loaded.items, str(store), SweepPaths.under(out / "results"), conds, limit=limit, engine=opts,
                     decode_workers=0, chunk=4, progress=False)
    cells, specs, benches = plan(args)
    own = engine is None
    eng = build_sweep_engine(opts) if engine is None else engine

    async def go() -> None:
        try:
            await run_planned(args, cells, specs, benches, eng, echo)
        finally:
            if own:
                await eng.aclose()

    asyncio.run(go())
    return write_analysis(out / "results", out / "analysis", n_boot=500)
