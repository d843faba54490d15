"""Helpers of the demo tests: screen a chain with an engine and read the funnel per kind."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from pathlib import Path

from benchcheck.demo import funnel as fn
from benchcheck.demo.run import Benchmarks
from benchcheck.engines.base import Engine
from benchcheck.items import Item, load_items
from benchcheck.screen.context import make_context
from benchcheck.screen.frames import CacheFrames
from benchcheck.screen.runner import RunConfig, run_step
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS
from benchcheck.store import read_rows
from loopback import serve_cli


def items_of(b: Benchmarks) -> list[Item]:
    loaded = load_items(b.paths)
    assert not loaded.errors, loaded.errors[:3]
    return loaded.items


def kinds_of(b: Benchmarks) -> dict[str, str]:
    return {it.item_id: it.kind for it in b.items}


def screen_chain(b: Benchmarks, engine: Engine, chain: tuple[int, ...], results: Path, workers: int = 1,
                 batch_items: int = 8, benches: list[str] | None = None) -> tuple[fn.Funnel, fn.Funnel]:
    """Run ``chain`` on the items (of ``benches``; no step 0); returns (observed, predicted) funnels."""
    frames = CacheFrames(b.frames)
    ctx = make_context(items_of(b), results, chain, frames, None, benches=benches)
    items = ctx.items

    async def run() -> None:
        for step in chain:
            cfg = RunConfig(step=step, intro=INTROS[DEFAULT_INTRO], workers=workers, batch_items=batch_items,
                            progress=False)
            await run_step(ctx, engine, cfg, lambda _: None)

    asyncio.run(run())
    kinds = kinds_of(b)
    observed = fn.tabulate(fn.observed_fates(ctx, None), kinds)
    return observed, fn.predicted(items, kinds, chain, dedup=False)


def decisions(results: Path, step: int) -> dict[str, tuple[object, ...]]:
    """item_id -> what decides it at ``step``: picks (or pick), removed, rounded log-probs."""
    out: dict[str, tuple[object, ...]] = {}
    for p in sorted((results / f"step{step}").glob("*.jsonl")):
        for r in read_rows(p):
            if r.get("status", "ok") != "ok":
                continue
            lp = r["lp"]
            rounded = [[round(v, 6) for v in x] for x in lp] if lp and isinstance(lp[0], list) else \
                [round(v, 6) for v in lp]
            out[r["item_id"]] = (r.get("picks", r.get("pick")), r["removed"], str(rounded))
    return out


def reference_server(label: str = "rules") -> AbstractContextManager[str]:
    """``benchcheck serve --engine reference`` as a subprocess on a free loopback port."""
    return serve_cli("--engine", "reference", "--model", label)
