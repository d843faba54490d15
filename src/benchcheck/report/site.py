"""``build_report``: the static audit site (HTML + CSS + JS + data chunks + PNG figures).

Opens from ``file://`` with no server and no network: templates are rendered here, the CSS and
JS are package files copied beside the pages, and the item data is split into small script
chunks (see :mod:`benchcheck.report.browser`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchcheck.atomic import clear_dead, swap_folder, write_json_atomic, writer_tag
from benchcheck.items import Item
from benchcheck.report import plots, stats
from benchcheck.report.audit import AuditData, Confidences, link_tables, read_audit, read_audits, read_confidences
from benchcheck.report.bench_page import BenchPage, bench_page, copy_thumbs
from benchcheck.report.browser import (
    FATE_CODE,
    FATE_MEANING,
    QUESTION_CHARS,
    BenchChunks,
    write_bench,
    write_file,
    write_index,
)
from benchcheck.report.options import ReportOptions
from benchcheck.report.probe import ProbeItems, read_probe, read_probe_items
from benchcheck.report.provenance import step_lines, warnings
from benchcheck.report.qa import QAData, read_qa
from benchcheck.report.source import (
    Step0,
    StepProvenance,
    bench_groups,
    read_group,
    read_step0,
    run_log,
    run_specs,
    sweep_revisions,
)
from benchcheck.report.sweep import (
    SweepAnswer,
    SweepData,
    analysis_verdicts,
    fmt_diff,
    ladders,
    plane,
    read_sweep,
    reasons,
    totals,
    verdict,
)
from benchcheck.screen.steps import STEPS
from benchcheck.stats.threads import one_blas_thread_process
from benchcheck.step0.probe_stamp import has_probe, left_out, stale_note
from benchcheck.step0.scope import not_deduplicated_note
from benchcheck.workers import process_pool

__all__ = ["Built", "ReportError", "ReportOptions", "build_report", "demo_report", "frame_check"]


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
    # shown in place of RESULTS/probe, made with another step 0 than the report's (``probe_note``)
    probe_note: str | None = None


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
            write_file(out / "static" / f.name, f.read_bytes())


class ReportError(Exception):
    """A precondition the user can fix (one line)."""


def check_out(out: Path) -> None:
    """A build replaces ``out`` whole, so ``out`` must be absent, empty or an earlier report."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "report.json").is_file())):
        raise ReportError(f"{out}: exists and is not a BenchCheck report (no report.json); choose another --out")


def leftovers(out: Path) -> tuple[str, ...]:
    """The name prefixes of a build's folders beside ``out``: its staging and the report it replaces."""
    return (f".{out.name}.building-", f".{out.name}.old-")


def build_report(opts: ReportOptions) -> Built:
    """Build the site in a staging folder beside ``opts.out``, then publish it by renames."""
    t0 = time.time()
    out = opts.out
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clear_dead(out.parent, leftovers(out))  # a killed build's folders (a live one's are left alone)
    building, replaced = leftovers(out)
    tag = writer_tag()
    staging = out.parent / f"{building}{tag}"
    staging.mkdir()
    try:
        built = _build(opts, staging)
        built.seconds = round(time.time() - t0, 2)
        write_json_atomic(staging / "report.json", {
            "results": str(opts.results), "benches": built.benches, "items": built.items, "flags": built.flags,
            "warnings": built.warnings, "data_bytes": built.data_bytes, "seconds": built.seconds}, indent=1)
        swap_folder(staging, out, out.parent / f"{replaced}{tag}")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return built


def _build(opts: ReportOptions, staging: Path) -> Built:
    sweep, qa = read_sweep(opts.sweep), read_qa(opts.qa)
    frames_base = None
    if opts.frames is not None:
        frames_base = "frames" if opts.copy_frames else Path(os.path.relpath(opts.frames.resolve(),
                                                                             opts.out.resolve())).as_posix()
    step0 = None
    if opts.step0 is not None:
        try:
            step0 = read_step0(opts.step0)
        except ValueError as e:
            raise ReportError(str(e)) from e
    stale = probe_note(opts, step0)
    prov: dict[int, StepProvenance] = {}
    pages: list[BenchPage] = []
    chunks: list[BenchChunks] = []
    summary: list[dict[str, Any]] = []
    for page, bc, rows, p in _bench_results(opts, staging, sweep, step0, stale is None):
        pages.append(page)
        chunks.append(bc)
        summary += rows
        for s, sp in p.items():
            prov.setdefault(s, StepProvenance()).merge(sp)
    built = Built(opts.out, opts.out / "index.html", len(pages), sum(p.n for p in pages))
    built.data_bytes = sum(c.bytes_written for c in chunks) + write_index(staging, chunks, opts.chain, frames_base)
    built.flags = [f for p in pages for f in p.flags]
    built.probe_note = stale
    lines = step_lines(prov)
    log = run_log(opts.results) + [{**r, "results": str(d)} for d in opts.side_results for r in run_log(d)]
    specs = {str(d): run_specs(d, opts.chain) for d in opts.side_results}
    sweep_log = run_log(sweep.path.parent) if sweep.path is not None else []
    sweep_revs = sweep_revisions(sweep.path.parent) if sweep.path is not None else []
    built.warnings = warnings(lines, log, specs, bases=(opts.results.parent, Path.cwd()), sweep_log=sweep_log,
                              sweep_revisions=sweep_revs)
    _render(opts, staging, built, pages, summary, lines, log, sweep, qa)
    return built


BenchResult = tuple[BenchPage, BenchChunks, list[dict[str, Any]], dict[int, StepProvenance]]


def _bench_task(opts: ReportOptions, staging: Path, bench: str, items: list[Item] | None,
                answers: dict[str, list[SweepAnswer]], conf: Confidences, step0: Step0 | None = None,
                probe: ProbeItems | None = None) -> BenchResult:
    """One benchmark end to end: rows read, chunks and thumbnails written, page data built."""
    prov: dict[int, StepProvenance] = {}
    ev = read_group(opts.results, bench, items, opts.chain, frame_check(opts.frames), prov, step0)
    bc = write_bench(staging, ev.bench, ev.items, opts.chain, answers, conf, probe)
    if opts.copy_frames and opts.frames is not None:
        copy_thumbs(staging, opts.frames, ev)
    return bench_page(opts, staging, ev, bc), bc, [dict(r) for r in ev.summary], prov


def _bench_results(opts: ReportOptions, staging: Path, sweep: SweepData, step0: Step0 | None,
                   with_probe: bool) -> list[BenchResult]:
    """Benchmarks are independent: with ``workers`` > 1 they run in spawned processes (each
    holds one benchmark at a time), and come back in benchmark order. ``with_probe``: the item
    views show RESULTS/probe (its step 0 is the report's, ``probe_note``)."""
    groups = bench_groups(opts.results, opts.items, opts.chain)
    conf = read_confidences(opts.audit)
    probed = read_probe_items(opts.results / "probe") if with_probe else {}

    def dups(its: list[Item] | None) -> Step0 | None:
        """Only this benchmark's step-0 removals travel to its task."""
        if step0 is None or its is None:
            return step0
        return step0.only(its)

    def mine(its: list[Item] | None) -> Confidences:
        """Only this benchmark's confidences travel to its task (ids are unique across benchmarks
        only within one; without items, the rows' ids are the benchmark's)."""
        if its is None:
            return conf
        return {it.item_id: conf[it.item_id] for it in its if it.item_id in conf}

    def probe_of(its: list[Item] | None) -> ProbeItems:
        if its is None:
            return probed
        return {it.item_id: probed[it.item_id] for it in its if it.item_id in probed}
    light = dataclasses.replace(opts, items=None)  # never pickle the whole pool per task
    bar = _bar(len(groups), opts.progress)
    out: dict[str, BenchResult] = {}
    try:
        if opts.workers <= 1 or len(groups) <= 1:
            for bench, its in groups:
                out[bench] = _bench_task(light, staging, bench, its, sweep.answers.get(bench, {}), mine(its),
                                         dups(its), probe_of(its))
                bar.update(1)
        else:
            with process_pool(min(opts.workers, len(groups)), one_blas_thread_process) as pool:
                futures = {pool.submit(_bench_task, light, staging, bench, its, sweep.answers.get(bench, {}),
                                       mine(its), dups(its), probe_of(its)): bench for bench, its in groups}
                for fut in as_completed(futures):
                    out[futures[fut]] = fut.result()
                    bar.update(1)
    finally:
        bar.close()
    return [out[b] for b, _ in groups]


def probe_note(opts: ReportOptions, step0: Step0 | None) -> str | None:
    """One note in place of RESULTS/probe (the audit page's section and the item views' probe)
    when that probe left out at step 0 other items than the report does (``stale_reason``, the
    rule ``audit.md`` follows); None when it is shown, or there is none."""
    folder = opts.results / "probe"
    if step0 is not None and opts.items is None:
        if not has_probe(folder):
            return None
        # the stand-in items read from rows have no duplicate step 0 kept out of the chain
        return (f"The probe in {folder} is not included: without --items the report cannot tell which items "
                "--step0 left out, so not whether the probe left out the same. Give the report --items.")
    pairs = left_out(opts.items or (), step0.removed(opts.items or ())) if step0 is not None else set()
    return stale_note(folder, pairs, "Rerun benchcheck probe with the report's --step0, or give the report the "
                                     "--step0 the probe ran with.")


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


def _render(opts: ReportOptions, out: Path, built: Built, pages: Sequence[BenchPage], summary: Sequence[dict[str, Any]],
            lines: Sequence[Any], log: Sequence[dict[str, Any]], sweep: SweepData, qa: QAData) -> None:
    env = _env()
    _copy_static(out)
    funnel = stats.funnel(summary)
    finals: Counter[str] = Counter()
    for p in pages:
        finals.update(p.finals)
    figs: dict[str, str] = {}
    if opts.plots and funnel:
        figs["funnel"] = plots.funnel_figure(out / "img" / "funnel.svg", funnel,
                                             common_steps(opts.chain)).relative_to(out).as_posix()
    if opts.plots and pages:
        figs["benches"] = plots.bench_removal_figure(out / "img" / "benches.svg", [p.name for p in pages],
                                                     [p.overall for p in pages]).relative_to(out).as_posix()
    common = {"warnings": built.warnings, "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "steps": common_steps(opts.chain), "chain": opts.chain}

    def page(name: str, template: str, root: str = "", **ctx: Any) -> None:
        html = env.get_template(template).render(root=root, page=name, **common, **ctx)
        write_file(out / name, html.encode())

    # the sentence probe, audit and export say too (one wording, ``step0.scope``)
    undeduplicated = not_deduplicated_note(counts) if (counts := stats.not_deduplicated(summary)) else None
    page("index.html", "overview.html", pages=pages, funnel=funnel, finals=finals, figs=figs,
         flags=built.flags, n_items=built.items, order=stats.FINAL_ORDER, labels=stats.FINAL_LABELS,
         results=str(opts.results), step0=opts.step0 is not None, undeduplicated=undeduplicated)
    for p in pages:
        page(f"bench/{p.slug}.html", "bench.html", root="../", b=p, labels=stats.FINAL_LABELS)
    page("sweep.html", "sweep.html", sweep=sweep, benches=_sweep_rows(opts, out, sweep),
         unparsed=reasons(totals({f"{b}/{c}": n for b, cs in sweep.unparsed.items() for c, n in cs.items()})),
         na=reasons(totals({f"{b}/{c}": n for b, cs in sweep.na.items() for c, n in cs.items()})),
         errors=reasons(totals({f"{b}/{c}": n for b, cs in sweep.errors.items() for c, n in cs.items()})))
    qa_fig = None
    if opts.plots and qa.latencies:
        qa_fig = plots.latency_figure(out / "img" / "qa_latency.svg", qa.latencies).relative_to(out).as_posix()
    page("qa.html", "qa.html", qa=qa, fig=qa_fig)
    audit, side = read_audit(opts.audit), read_audits(opts.side_audits)
    link_tables(audit, out, "audit/main")
    for i, a in enumerate(side):
        link_tables(a, out, f"audit/side{i + 1}")
    probe = read_probe(opts.results / "probe") if built.probe_note is None else AuditData(None, label="probe")
    link_tables(probe, out, "audit/probe")
    page("audit.html", "audit.html", audit=audit, side=side, probe=probe, probe_note=built.probe_note)
    page("items.html", "items.html", fates=[(FATE_CODE[k], k, FATE_MEANING[k]) for k in FATE_CODE],
         question_chars=QUESTION_CHARS)
    page("provenance.html", "provenance.html", lines=lines, log=log[-200:], specs=run_specs(opts.results, opts.chain),
         results=str(opts.results))


def common_steps(chain: Sequence[int]) -> dict[int, str]:
    """Step number -> name, step 0 (the duplicates) first."""
    return {0: "duplicates", **{s: STEPS[s].name for s in chain if s in STEPS}}


def _sweep_rows(opts: ReportOptions, out: Path, sweep: SweepData) -> list[dict[str, Any]]:
    from benchcheck.report.browser import slug

    rows = []
    own = analysis_verdicts(sweep.path) if sweep.available else {}
    for bench in sorted({*sweep.acc, *sweep.na, *sweep.unparsed, *sweep.errors}):
        acc = sweep.acc.get(bench, {})
        fig = None
        if opts.plots and acc:
            fig = plots.ladder_figure(out / "img" / f"sweep_{slug(bench)}.svg", bench, ladders(acc),
                                      plane(acc)).relative_to(out).as_posix()
        unparsed, na, errors = (sweep.unparsed.get(bench, {}), sweep.na.get(bench, {}), sweep.errors.get(bench, {}))
        conds = [{"name": c, "rate": acc.get(c), "unparsed": reasons(unparsed.get(c)), "na": reasons(na.get(c)),
                  "errors": reasons(errors.get(c)),
                  "all_unparsed": c in acc and acc[c].n > 0 and sum(unparsed.get(c, Counter()).values()) == acc[c].n}
                 for c in sorted({*acc, *unparsed, *na, *errors})]
        rows.append({"name": bench, "acc": acc, "verdict": own.get(bench) or verdict(acc), "fig": fig,
                     "conds": conds, "unparsed": reasons(totals(unparsed)), "na": reasons(totals(na)),
                     "errors": reasons(totals(errors))})
    return rows


def demo_report(results: Path, items_dir: Path, frames: Path | None, sweep: Path | None = None,
                qa: Path | None = None, side_results: Sequence[Path] = (), audit: Path | None = None,
                side_audits: Sequence[Path] = (), step0: Path | None = None) -> Path:
    """The demo's report (``results/report``), linking the demo's frame cache, with the sweep and
    QA sections when given; returns index.html."""
    from benchcheck.items import load_items

    items = load_items([items_dir]).items
    return build_report(ReportOptions(results, results / "report", items, sweep=sweep, qa=qa, audit=audit,
                                      frames=frames, side_results=tuple(side_results),
                                      side_audits=tuple(side_audits), step0=step0)).index
