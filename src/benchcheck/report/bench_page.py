"""One benchmark's page data: removal rates, flags, removed examples, inline charts, and the
thumbnails of the frames its items were shown (when the report copies them)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.protocol import LOG2
from benchcheck.report import plots, stats, svg
from benchcheck.report.browser import BenchChunks, safe_video_id
from benchcheck.report.options import ReportOptions
from benchcheck.report.source import BenchEvidence
from benchcheck.screen.fates import REMOVED

EXAMPLES_PER_BENCH = 8
THUMB_PX = 160


@dataclass(slots=True)
class BenchPage:
    name: str
    slug: str
    n: int
    finals: dict[str, int]
    summary: list[dict[str, Any]]
    rates: dict[int, stats.Rate]
    overall: stats.Rate
    flags: list[str]
    examples: list[dict[str, Any]]
    figure: str | None
    charts: list[str] = field(default_factory=list)  # inline SVG


def copy_thumbs(out: Path, frames: Path, bench: BenchEvidence) -> None:
    """Copy the frames each item was shown, at most THUMB_PX on the long side (once per file)."""
    from PIL import Image

    for ev in bench.items:
        vid = safe_video_id(ev.item.video_id)
        if vid is None:
            continue
        wanted = {p for row in ev.rows.values() for p in ((row.get("frames") or {}).get("positions") or [])
                  if isinstance(p, int)}
        for k in sorted(wanted):
            src, dst = frames / vid / f"frame_{k}.jpg", out / "frames" / vid / f"frame_{k}.jpg"
            if dst.is_file() or not src.is_file():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                with Image.open(src) as im:
                    im.thumbnail((THUMB_PX, THUMB_PX))
                    im.convert("RGB").save(dst.with_suffix(".tmp"), format="JPEG", quality=80)
                os.replace(dst.with_suffix(".tmp"), dst)
            except OSError:
                continue  # an unreadable frame shows as a missing thumbnail, never stops the report


def _examples(bench: BenchEvidence) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ev in bench.items:
        if ev.final == REMOVED and len(out) < EXAMPLES_PER_BENCH:
            s = ev.removed_at
            out.append({"id": ev.item.item_id, "q": ev.item.question, "gold": ev.item.options[ev.item.answer]
                        if 0 <= ev.item.answer < len(ev.item.options) else "?", "step": s,
                        "margin": ev.margins.get(s) if s is not None else None})
    return out


def bench_page(opts: ReportOptions, staging: Path, bench: BenchEvidence, chunks: BenchChunks) -> BenchPage:
    rates = stats.removal_rates(bench)
    finals = stats.final_counts(bench.items)
    # step 0 looked at every item it removed (a duplicate has no fate at a later step)
    screened = sum(1 for ev in bench.items
                   if ev.removed_at == 0 or any(f in ("kept", "removed") for f in ev.fates.values()))
    figure, charts = None, []
    if opts.plots:
        gold, picks = stats.positions(bench.items, 1)
        margins = {s: stats.step_margins(bench.items, s) for s in opts.chain}
        charts = _charts(opts.chain, rates, margins, gold, picks)
        if opts.bench_png:
            name = f"img/bench_{chunks.slug}.png"
            plots.bench_figure(staging / name, bench.bench, opts.chain, rates, margins, gold, picks)
            figure = "../" + name
    return BenchPage(bench.bench, chunks.slug, len(bench.items), dict(finals), [dict(r) for r in bench.summary],
                     rates, stats.wilson(finals[REMOVED], screened), list(bench.flags), _examples(bench), figure,
                     charts)


def _charts(chain: Sequence[int], rates: dict[int, stats.Rate], margins: dict[int, list[float]],
            gold: Counter[int], picks: Counter[int]) -> list[str]:
    # the steps that decided something (step 0, the duplicates, when the report has it): a step
    # without decisions would be an empty slot; the table below lists it
    shown = [s for s in ([0, *chain] if 0 in rates else chain) if s in rates and rates[s].n]
    r = [rates[s] for s in shown]
    out = []
    if shown:
        out.append(svg.bars("removal rate per step, 95% interval", [f"step {s}" for s in shown],
                            [("removed %", plots.REMOVED_C, [100 * (x.value or 0) for x in r])], ymax=100.0,
                            err=[(100 * (x.lo or 0), 100 * (x.hi or 0)) for x in r], ylabel="% removed"))
    if gold or picks:  # no step-1 rows: no (empty) panel
        k = max([*gold, *picks, 1]) + 1
        out.append(svg.bars("step 1 answer position (all permutations)", list(plots.LETTERS[:k]),
                            [("gold", plots.GOLD, [float(gold.get(j, 0)) for j in range(k)]),
                             ("model pick", plots.PICK, [float(picks.get(j, 0)) for j in range(k)])],
                            ylabel="count", integer=True))
    for s in chain:
        if margins.get(s):
            # the range always takes in the threshold: margins all on one side of it still show which
            counts, edges = stats.histogram(margins[s], bins=30, lo=min(*margins[s], LOG2), hi=max(*margins[s], LOG2))
            out.append(svg.histogram(f"step {s} margin (n={len(margins[s])})", counts, edges, vline=LOG2,
                                     xlabel="margin (nats)"))
    return out


