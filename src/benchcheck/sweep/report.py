"""``benchcheck sweep analyze``'s outputs: ``sweep_summary.csv``, ``sweep_summary.md``, PNG plots."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from benchcheck.atomic import write_text_atomic
from benchcheck.sweep.analysis import VERDICT_RULE, Analysis, Interval, analyze
from benchcheck.sweep.results import CSV_NAME, read_csv

CSV_FIELDS = ("bench", "kind", "condition", "versus", "estimate", "ci_low", "ci_high", "n_items", "unparsed", "na",
              "verdict")


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.4f}"


def summary_csv(a: Analysis) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for c in a.conditions:
        i = c.accuracy
        w.writerow([c.bench, "accuracy", c.condition, "", _fmt(i.est), _fmt(i.lo), _fmt(i.hi), i.n, c.unparsed, c.na,
                    ""])
    for bench, x, y, d in a.diffs:
        w.writerow([bench, "paired_difference", x, y, _fmt(d.est), _fmt(d.lo), _fmt(d.hi), d.n, "", "", ""])
    for v in a.verdicts:
        for kind, e, cond, vs in (("pixels_effect", v.pixels, v.pixels_hi or "", "v_32_s168"),
                                  ("frames_effect", v.frames, "max(v_128_s224, fps)", "v_8_s224")):
            if e is None:
                w.writerow([v.bench, kind, cond, vs, "", "", "", 0, "", "", v.verdict])
            else:
                w.writerow([v.bench, kind, cond, vs, _fmt(e.est), _fmt(e.lo), _fmt(e.hi), e.n, "", "", v.verdict])
    return buf.getvalue()


def _ci(e: Interval | None) -> str:
    return "n/a" if e is None else f"{e.est:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}] (n={e.n})"


def summary_md(a: Analysis) -> str:
    lines = ["# Frames x pixels sweep: what each benchmark prefers", "", f"**Verdict rule.** {VERDICT_RULE}", "",
             "| benchmark | pixels effect [95% CI] | frames effect [95% CI] | verdict |", "|---|---|---|---|"]
    lines += [f"| {v.bench} | {_ci(v.pixels)} | {_ci(v.frames)} | **{v.verdict}** |" for v in a.verdicts]
    lines += ["", "## Accuracy per condition (95% bootstrap CI, clustered by video)", "",
              "| benchmark | condition | accuracy | 95% CI | items | unparsed | NA |", "|---|---|---|---|---|---|---|"]
    for c in a.conditions:
        i = c.accuracy
        lines.append(f"| {c.bench} | {c.condition} | {_fmt(i.est)} | [{_fmt(i.lo)}, {_fmt(i.hi)}] | {i.n} | "
                     f"{c.unparsed} | {c.na} |")
    lines += ["", "## Paired differences (same items, same resampled videos)", "",
              "| benchmark | condition | minus | difference [95% CI] |", "|---|---|---|---|"]
    lines += [f"| {b} | {x} | {y} | {_ci(d)} |" for b, x, y, d in a.diffs]
    return "\n".join(lines) + "\n"


def write_analysis(results: Path, out: Path, n_boot: int = 2000, seed: int = 0, plots: bool = True) -> dict[str, Path]:
    """Analyze ``results/conditions_results.csv`` into ``out``; returns the files written."""
    rows = read_csv(results / CSV_NAME)
    if not rows:
        raise ValueError(f"{results / CSV_NAME}: no rows to analyze")
    a = analyze(rows, n_boot=n_boot, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "sweep_summary.csv", "markdown": out / "sweep_summary.md"}
    write_text_atomic(paths["csv"], summary_csv(a))
    write_text_atomic(paths["markdown"], summary_md(a))
    if plots:
        from benchcheck.sweep.plots import write_plots

        paths.update(write_plots(a, out))
    return paths
