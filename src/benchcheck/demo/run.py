"""The README's first command: run the main job on the embedded demo."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchcheck.demo.items import write_demo_items
from benchcheck.items import load_items
from benchcheck.items.report import validation_table
from benchcheck.screen.context import make_context
from benchcheck.screen.frames import CacheFrames
from benchcheck.screen.steps import DEFAULT_CHAIN


def run_demo(out: str | Path, echo: Callable[[str], None] = print) -> Path:
    """Generate the demo pool, validate it and plan step 1; returns the output folder."""
    out = Path(out)
    pool = write_demo_items(out / "items")
    echo(f"demo items: {', '.join(str(p) for p in pool.paths)}")
    loaded = load_items(pool.paths)
    echo(validation_table(loaded))
    echo(f"{len(loaded.errors)} bad items reported and skipped")
    plan = make_context(loaded.items, out / "results", DEFAULT_CHAIN, CacheFrames(out / "frames"), None).plan(1)
    for line in plan.lines(invalid=len(loaded.errors)):
        echo(line)
    echo(f"outputs under {out}")
    return out
