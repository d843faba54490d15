"""The report's figures (matplotlib, Agg, PNG). Built with ``Figure`` directly, not pyplot: no
global state, and nothing is kept alive between benchmarks."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchcheck.atomic import write_bytes_atomic
from benchcheck.protocol import LOG2
from benchcheck.report.stats import Rate

DPI = 72
GOLD, PICK, REMOVED_C, KEPT_C = "#e0a030", "#3070c0", "#c03030", "#50a050"
FUNNEL_COLOURS = {"removed": REMOVED_C, "kept": KEPT_C, "failed": "#404040", "pending": "#a0a0a0",
                  "not_screened": "#d0d0f0"}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _figure(w: float, h: float) -> Any:
    from matplotlib.figure import Figure

    # fixed margins: the constrained layout engine doubled the drawing time
    fig = Figure(figsize=(w, h))
    fig.subplots_adjust(left=0.08, right=0.98, top=0.9, bottom=0.14, wspace=0.35, hspace=0.55)
    return fig


def _save(fig: Any, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _err(rates: Sequence[Rate]) -> list[list[float]]:
    """Error-bar lengths in percent points (clamped: float rounding can make them -1e-17)."""
    return [[max(0.0, 100 * ((r.value or 0.0) - (r.lo or 0.0))) for r in rates],
            [max(0.0, 100 * ((r.hi or 0.0) - (r.value or 0.0))) for r in rates]]


def _rates_panel(ax: Any, labels: Sequence[str], rates: Sequence[Rate], title: str) -> None:
    xs = list(range(len(rates)))
    vals = [100 * (r.value or 0.0) for r in rates]
    ax.bar(xs, vals, color=REMOVED_C, alpha=0.75)
    ax.errorbar(xs, vals, yerr=_err(rates), fmt="none", ecolor="black", capsize=3)
    ax.set_xticks(xs, labels, fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("removed %")
    ax.set_title(title, fontsize=9)


def bench_figure(path: Path, bench: str, steps: Sequence[int], rates: Mapping[int, Rate],
                 margins: Mapping[int, Sequence[float]], gold: Counter[int], picks: Counter[int]) -> Path:
    """One PNG per benchmark: removal rate per step (95 % Wilson), answer positions (step 1),
    and a margin histogram per step with the log 2 threshold."""
    shown = [s for s in steps if margins.get(s)]
    ncols = max(3, len(shown))
    fig = _figure(2.3 * ncols, 4.6)
    grid = fig.add_gridspec(2, ncols)
    _rates_panel(fig.add_subplot(grid[0, : ncols // 2]), [f"step {s}" for s in steps],
                 [rates.get(s, Rate(0, 0, None, None)) for s in steps], f"{bench}: removal rate, 95% interval")
    ax = fig.add_subplot(grid[0, ncols // 2:])
    k = max([*gold, *picks, 1]) + 1
    xs = list(range(k))
    ax.bar([x - 0.2 for x in xs], [gold.get(x, 0) for x in xs], width=0.4, color=GOLD, label="gold")
    ax.bar([x + 0.2 for x in xs], [picks.get(x, 0) for x in xs], width=0.4, color=PICK, label="model pick")
    ax.set_xticks(xs, [LETTERS[x] for x in xs], fontsize=8)
    ax.set_title("step 1 answer position (all permutations)", fontsize=9)
    ax.legend(fontsize=7)
    for j, s in enumerate(shown):
        ax = fig.add_subplot(grid[1, j])
        counts, edges = np.histogram(np.asarray(margins[s], dtype=float), bins=30)
        ax.stairs(counts, edges, fill=True, color="#707070")
        ax.axvline(LOG2, color=REMOVED_C, linestyle="--", linewidth=1)
        ax.set_title(f"step {s} margin (n={len(margins[s])})", fontsize=8)
        ax.tick_params(labelsize=7)
    if not shown:
        ax = fig.add_subplot(grid[1, :])
        ax.text(0.5, 0.5, "no margins yet", ha="center", va="center")
        ax.set_axis_off()
    return _save(fig, path)


def funnel_figure(path: Path, funnel: Mapping[int, Mapping[str, int]]) -> Path:
    """Per step, how the items that reached it ended there (stacked bars)."""
    steps = sorted(funnel)
    fig = _figure(7.5, 0.45 * len(steps) + 1.2)
    fig.subplots_adjust(left=0.12, top=0.78, bottom=0.2)
    ax = fig.add_subplot()
    left = [0] * len(steps)
    for key, colour in FUNNEL_COLOURS.items():
        vals = [funnel[s][key] for s in steps]
        ax.barh([f"step {s}" for s in steps], vals, left=left, color=colour, label=key.replace("_", " "))
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("items")
    ax.legend(fontsize=7, ncols=5, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return _save(fig, path)


def bench_removal_figure(path: Path, benches: Sequence[str], rates: Sequence[Rate]) -> Path:
    """Share of each benchmark's items removed by the chain (any step), with 95 % intervals."""
    order = sorted(range(len(benches)), key=lambda i: -(rates[i].value or 0.0))
    fig = _figure(7.5, 0.16 * len(benches) + 1.0)
    fig.subplots_adjust(left=0.25, top=1 - 0.3 / (0.16 * len(benches) + 1.0), bottom=0.6 / (0.16 * len(benches) + 1.0))
    ax = fig.add_subplot()
    ys = list(range(len(order)))
    vals = [100 * (rates[i].value or 0.0) for i in order]
    ax.barh(ys, vals, xerr=_err([rates[i] for i in order]), color=REMOVED_C, alpha=0.75, ecolor="black", capsize=1.5)
    ax.set_yticks(ys, [benches[i] for i in order], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("removed % of screened items")
    return _save(fig, path)


def ladder_figure(path: Path, bench: str, ladders: Mapping[str, Sequence[tuple[float, Rate]]],
                  plane: Sequence[tuple[float, float, float]]) -> Path:
    """Sweep accuracy along each ladder (with intervals), and the frames x short-side plane."""
    names = [n for n in ladders if ladders[n]]
    fig = _figure(2.6 * (len(names) + 1), 2.6)
    grid = fig.add_gridspec(1, len(names) + 1)
    for j, name in enumerate(names):
        ax = fig.add_subplot(grid[0, j])
        pts = ladders[name]
        xs = [x for x, _ in pts]
        ys = [100 * (r.value or 0) for _, r in pts]
        ax.errorbar(xs, ys, yerr=_err([r for _, r in pts]), marker="o", capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{bench}: {name}", fontsize=8)
        ax.set_ylabel("accuracy %", fontsize=7)
        ax.tick_params(labelsize=7)
    ax = fig.add_subplot(grid[0, len(names)])
    if plane:
        sc = ax.scatter([p[0] for p in plane], [p[1] for p in plane], c=[100 * p[2] for p in plane], s=120,
                        cmap="viridis", vmin=0, vmax=100)
        fig.colorbar(sc, ax=ax, label="accuracy %")
        ax.set_xscale("log", base=2)
    ax.set_xlabel("frames", fontsize=7)
    ax.set_ylabel("short side px", fontsize=7)
    ax.set_title("pixels x frames", fontsize=8)
    return _save(fig, path)


def latency_figure(path: Path, latencies: Sequence[float]) -> Path:
    fig = _figure(6, 2.6)
    ax = fig.add_subplot()
    counts, edges = np.histogram(np.asarray(latencies, dtype=float), bins=40)
    ax.stairs(counts, edges, fill=True, color=PICK)
    ax.set_xlabel("seconds per item (wall clock)")
    ax.set_ylabel("items")
    return _save(fig, path)
