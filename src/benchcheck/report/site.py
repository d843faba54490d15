"""``build_report``: the static audit site (HTML + CSS + JS + data chunks + PNG figures).

Opens from ``file://`` with no server and no network: templates are rendered here, the CSS and
JS are package files copied beside the pages, and the item data is split into small script
chunks (see :mod:`benchcheck.report.browser`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic, write_text_atomic
from benchcheck.items import Item
from benchcheck.report import plots, stats
from benchcheck.report.browser import BenchChunks, safe_video_id, write_bench, write_index
from benchcheck.report.provenance import step_lines, warnings
from benchcheck.report.qa import QAData, read_qa
from benchcheck.report.source import BenchEvidence, StepProvenance, iter_benches, run_log, run_specs
from benchcheck.report.sweep import SweepData, fmt_diff, ladders, plane, read_sweep, verdict
from benchcheck.screen.fates import REMOVED
from benchcheck.screen.steps import STEPS

Echo = Callable[[str], None]
EXAMPLES_PER_BENCH = 8
THUMB_PX = 160


@dataclass(slots=True)
class ReportOptions:
    results: Path
    out: Path
    items: Sequence[Item] | None = None
    chain: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    sweep: Path | None = None
    qa: Path | None = None
    frames: Path | None = None  # frame cache root (pool_frames)
    copy_frames: bool = False  # copy the shown frames small instead of referencing the cache
    plots: bool = True


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


@dataclass(slots=True)
class Built:
    out: Path
    index: Path
    benches: int = 0
    items: int = 0
    data_bytes: int = 0
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _env() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("benchcheck.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    env.filters["rate"] = lambda r: "-" if r.value is None else (
        f"{100 * r.value:.1f}% [{100 * (r.lo or 0):.1f}, {100 * (r.hi or 0):.1f}]")
    env.filters["diff"] = fmt_diff
    env.filters["num"] = lambda v: "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
    return env


def _copy_static(out: Path) -> None:
    static = resources.files("benchcheck.report") / "static"
    (out / "static").mkdir(parents=True, exist_ok=True)
    for f in static.iterdir():
        if f.is_file():
            write_text_atomic(out / "static" / f.name, f.read_text(encoding="utf-8"))


def _thumbs(out: Path, frames: Path, bench: BenchEvidence) -> None:
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


def _bench_page(opts: ReportOptions, bench: BenchEvidence, chunks: BenchChunks) -> BenchPage:
    rates = stats.removal_rates(bench)
    finals = stats.final_counts(bench.items)
    screened = sum(1 for ev in bench.items if any(f in ("kept", "removed") for f in ev.fates.values()))
    figure = None
    if opts.plots:
        gold, picks = stats.positions(bench.items, 1)
        margins = {s: stats.step_margins(bench.items, s) for s in opts.chain}
        name = f"img/bench_{chunks.slug}.png"
        plots.bench_figure(opts.out / name, bench.bench, opts.chain, rates, margins, gold, picks)
        figure = "../" + name
    return BenchPage(bench.bench, chunks.slug, len(bench.items), dict(finals), [dict(r) for r in bench.summary],
                     rates, stats.wilson(finals[REMOVED], screened), list(bench.flags), _examples(bench), figure)


def build_report(opts: ReportOptions, echo: Echo = print, progress: bool = True) -> Built:
    t0 = time.time()
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    sweep, qa = read_sweep(opts.sweep), read_qa(opts.qa)
    frames_base = None
    if opts.frames is not None:
        frames_base = "frames" if opts.copy_frames else Path(os.path.relpath(opts.frames.resolve(),
                                                                             out.resolve())).as_posix()
    has_frames = frame_check(opts.frames)
    prov: dict[int, StepProvenance] = {}
    pages: list[BenchPage] = []
    chunks: list[BenchChunks] = []
    summary: list[dict[str, Any]] = []
    bar = _bar(len({i.bench for i in opts.items}) if opts.items is not None else None, progress)
    for bench in iter_benches(opts.results, opts.items, opts.chain, has_frames, prov):
        bc = write_bench(out, bench.bench, bench.items, opts.chain, sweep.answers.get(bench.bench, {}))
        if opts.copy_frames and opts.frames is not None:
            _thumbs(out, opts.frames, bench)
        pages.append(_bench_page(opts, bench, bc))
        chunks.append(bc)
        summary += [dict(r) for r in bench.summary]
        bar.update(1)
    bar.close()
    built = Built(out, out / "index.html", len(pages), sum(p.n for p in pages))
    built.data_bytes = sum(c.bytes_written for c in chunks) + write_index(out, chunks, opts.chain, frames_base)
    built.flags = [f for p in pages for f in p.flags]
    lines = step_lines(prov)
    log = run_log(opts.results)
    built.warnings = warnings(lines, log)
    _render(opts, built, pages, summary, lines, log, sweep, qa)
    built.seconds = round(time.time() - t0, 2)
    write_json_atomic(out / "report.json", {
        "results": str(opts.results), "benches": built.benches, "items": built.items, "flags": built.flags,
        "warnings": built.warnings, "data_bytes": built.data_bytes, "seconds": built.seconds,
        "sweep": sweep.reason or "ok", "qa": qa.reason or "ok"}, indent=1)
    return built


def frame_check(frames: Path | None) -> Callable[[Item], bool]:
    if frames is None:
        return lambda _item: False
    from benchcheck.screen.frames import CacheFrames

    cache = CacheFrames(frames)
    return lambda item: bool(item.video_id) and cache.available(str(item.video_id))


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int | None, progress: bool) -> Any:
    if not progress:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc="report", unit="bench", leave=False)


def _render(opts: ReportOptions, built: Built, pages: Sequence[BenchPage], summary: Sequence[dict[str, Any]],
            lines: Sequence[Any], log: Sequence[dict[str, Any]], sweep: SweepData, qa: QAData) -> None:
    out = opts.out
    env = _env()
    _copy_static(out)
    funnel = stats.funnel(summary)
    finals: Counter[str] = Counter()
    for p in pages:
        finals.update(p.finals)
    figs: dict[str, str] = {}
    if opts.plots and funnel:
        figs["funnel"] = plots.funnel_figure(out / "img" / "funnel.png", funnel).relative_to(out).as_posix()
    if opts.plots and pages:
        figs["benches"] = plots.bench_removal_figure(out / "img" / "benches.png", [p.name for p in pages],
                                                     [p.overall for p in pages]).relative_to(out).as_posix()
    common = {"warnings": built.warnings, "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "steps": {s: STEPS[s].name for s in opts.chain if s in STEPS}, "chain": opts.chain}

    def page(name: str, template: str, root: str = "", **ctx: Any) -> None:
        html = env.get_template(template).render(root=root, page=name, **common, **ctx)
        write_text_atomic(out / name, html)

    page("index.html", "overview.html", pages=pages, funnel=funnel, finals=finals, figs=figs,
         flags=built.flags, n_items=built.items, order=stats.FINAL_ORDER, results=str(opts.results))
    for p in pages:
        page(f"bench/{p.slug}.html", "bench.html", root="../", b=p)
    page("sweep.html", "sweep.html", sweep=sweep, benches=_sweep_rows(opts, sweep))
    qa_fig = None
    if opts.plots and qa.latencies:
        qa_fig = plots.latency_figure(out / "img" / "qa_latency.png", qa.latencies).relative_to(out).as_posix()
    page("qa.html", "qa.html", qa=qa, fig=qa_fig)
    page("items.html", "items.html")
    page("provenance.html", "provenance.html", lines=lines, log=log[-200:], specs=run_specs(opts.results, opts.chain),
         results=str(opts.results))


def _sweep_rows(opts: ReportOptions, sweep: SweepData) -> list[dict[str, Any]]:
    from benchcheck.report.browser import slug

    rows = []
    for bench, acc in sweep.acc.items():
        fig = None
        if opts.plots:
            fig = plots.ladder_figure(opts.out / "img" / f"sweep_{slug(bench)}.png", bench, ladders(acc),
                                      plane(acc)).relative_to(opts.out).as_posix()
        rows.append({"name": bench, "acc": acc, "verdict": verdict(acc), "fig": fig})
    return rows


def remove_stale(out: Path) -> None:
    """Drop the data and figures of an earlier build, so a smaller pool leaves no stale chunks."""
    for sub in ("data", "img", "bench"):
        shutil.rmtree(out / sub, ignore_errors=True)
