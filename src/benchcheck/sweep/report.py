"""``benchcheck sweep analyze``'s outputs: ``sweep_summary.csv``, ``sweep_summary.md``, PNG plots, and
the settings it used next to the results (``sweep_analysis_settings.json``), so the HTML report's
sweep page computes the same verdicts from the same CSV."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path

from benchcheck.atomic import write_json_atomic, write_text_atomic
from benchcheck.sweep.analysis import (
    DEFAULT,
    FRAMES_HI,
    FRAMES_LO,
    PIXELS_HI,
    PIXELS_LO,
    Analysis,
    Interval,
    Settings,
    analyze,
    verdict_rule,
)
from benchcheck.sweep.results import CSV_NAME, read_csv
from benchcheck.sweep.verdict_stats import INTERVAL_METHOD

CSV_FIELDS = ("bench", "kind", "condition", "versus", "estimate", "ci_low", "ci_high", "n_items", "unparsed", "na",
              "errors", "verdict", "n_videos", "p_value", "reason")
SETTINGS_NAME = "sweep_analysis_settings.json"


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.4f}"


def _p(p: float | None) -> str:
    return "" if p is None else f"{p:.6f}"


def summary_csv(a: Analysis) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for c in a.conditions:
        i = c.accuracy
        w.writerow([c.bench, "accuracy", c.condition, "", _fmt(i.est), _fmt(i.lo), _fmt(i.hi), i.n, c.unparsed, c.na,
                    c.errors, "", i.n_videos, "", ""])
    for bench, x, y, d in a.diffs:
        w.writerow([bench, "paired_difference", x, y, _fmt(d.est), _fmt(d.lo), _fmt(d.hi), d.n, "", "", "", "",
                    d.n_videos, "", ""])
    for v in a.verdicts:
        frames_cond = f"max({', '.join(v.frames_rungs)})" if v.frames_rungs else "max(v_128_s224, fps)"
        errors = dict(v.errors)
        for kind, e, cond, vs, p, conds in (
                ("pixels_effect", v.pixels, v.pixels_hi or "", PIXELS_LO, v.p_pixels, (*PIXELS_HI, PIXELS_LO)),
                ("frames_effect", v.frames, frames_cond, FRAMES_LO, v.p_frames, (*FRAMES_HI, FRAMES_LO))):
            n_err = sum(errors.get(c, 0) for c in conds)  # the error rows of every condition the effect may use
            if e is None:
                w.writerow([v.bench, kind, cond, vs, "", "", "", 0, "", "", n_err, v.verdict, 0, "", v.reason])
            else:
                w.writerow([v.bench, kind, cond, vs, _fmt(e.est), _fmt(e.lo), _fmt(e.hi), e.n, "", "", n_err,
                            v.verdict, e.n_videos, _p(p), v.reason])
    return buf.getvalue()


def effect_text(e: Interval | None) -> str:
    """An effect as both outputs print it: estimate [interval] (items, videos)."""
    if e is None or math.isnan(e.est):
        return "n/a"
    return f"{e.est:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}] (n={e.n}, {e.n_videos} videos)"


def error_text(statuses: tuple[tuple[str, int], ...]) -> str:
    """``3 (error 2, timeout 1)``; ``0`` for none."""
    n = sum(k for _, k in statuses)
    return f"{n} ({', '.join(f'{s} {k}' for s, k in statuses)})" if n else "0"


def _pv(p: float | None) -> str:
    return "-" if p is None else f"{p:.4f}"


def summary_md(a: Analysis) -> str:
    s = a.settings
    level = f"{100 * (1 - s.alpha):g}%"
    lines = ["# Frames x pixels sweep: what each benchmark prefers", "", f"**Verdict rule.** {verdict_rule(s)}", "",
             f"| benchmark | pixels effect [{level} interval] | p | frames effect [{level} interval] | p | verdict "
             "| reason |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {v.bench} | {effect_text(v.pixels)} | {_pv(v.p_pixels)} | {effect_text(v.frames)} | "
              f"{_pv(v.p_frames)} | **{v.verdict}** | {v.reason} |" for v in a.verdicts]
    warnings = a.unparsed_warnings() + a.error_warnings()
    if warnings:
        lines += ["", "**Warning.** " + " ".join(f"{w}." for w in warnings)]
    lines += ["", f"## Accuracy per condition ({level} {INTERVAL_METHOD})", "",
              "Error rows (a status that is no answer: an older run's or another tool's `error`, `timeout`) are "
              "left out of the accuracy, which rests on the items answered; the errors column counts them by status.",
              "",
              "| benchmark | condition | accuracy | interval | items | videos | unparsed | NA | errors |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in a.conditions:
        i = c.accuracy
        acc, interval = ((_fmt(i.est), f"[{_fmt(i.lo)}, {_fmt(i.hi)}]") if i.n
                         else ("n/a", "no answer" if c.errors else "no item applies"))
        lines.append(f"| {c.bench} | {c.condition} | {acc} | {interval} | {i.n} | {i.n_videos} | {c.unparsed} | "
                     f"{c.na} | {error_text(c.error_statuses)} |")
    lines += ["", f"## Paired differences (same items; {level} {INTERVAL_METHOD})", "",
              "| benchmark | condition | minus | difference [interval] |", "|---|---|---|---|"]
    lines += [f"| {b} | {x} | {y} | {effect_text(d)} |" for b, x, y, d in a.diffs]
    return "\n".join(lines) + "\n"


def settings_json(s: Settings) -> dict[str, object]:
    return dataclasses.asdict(s)


def read_settings(results: Path) -> Settings:
    """The settings the last ``sweep analyze`` of ``results`` used (the defaults when none or unreadable)."""
    p = results / SETTINGS_NAME
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
        fields = {f.name for f in dataclasses.fields(Settings)}
        return Settings(**{k: v for k, v in raw.items() if k in fields})
    except (OSError, ValueError, TypeError, AttributeError):
        return DEFAULT


def write_analysis(results: Path, out: Path, settings: Settings = DEFAULT,
                   plots: bool = True) -> tuple[dict[str, Path], Analysis]:
    """Analyze ``results/conditions_results.csv`` into ``out``; returns the files written and the
    analysis they were written from (its verdicts and warnings, without analyzing again)."""
    rows = read_csv(results / CSV_NAME)
    if not rows:
        raise ValueError(f"{results / CSV_NAME}: no rows to analyze")
    a = analyze(rows, settings)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "sweep_summary.csv", "markdown": out / "sweep_summary.md",
             "settings": results / SETTINGS_NAME}
    write_text_atomic(paths["csv"], summary_csv(a))
    write_text_atomic(paths["markdown"], summary_md(a))
    write_json_atomic(paths["settings"], {**settings_json(settings), "out": str(out.resolve())}, indent=1)
    if plots:
        from benchcheck.sweep.plots import write_plots

        paths.update(write_plots(a, out))
    return paths, a
