"""The report's figures (matplotlib, Agg): SVG for the pages (crisp at any zoom, text stays
text), PNG at :data:`DPI` for ``--bench-png``. Built with ``Figure`` directly, not pyplot: no
global state, and nothing is kept alive between benchmarks.

Legibility rules: every text at least :data:`FONT` pt; saved with a tight bounding box so no
label is cut; axes that count items show whole numbers; the sweep's axes are marked at the
ladder's own rungs (168, 224, 448 px; 8, 32, 128 frames), not at powers of two.
"""

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

DPI = 150  # PNGs only (SVG has no pixels)
FONT = 10
GOLD, PICK, REMOVED_C, KEPT_C = "#e0a030", "#3070c0", "#c03030", "#50a050"
FUNNEL_COLOURS = {"removed": REMOVED_C, "kept": KEPT_C, "failed": "#404040", "pending": "#a0a0a0",
                  "not_screened": "#d0d0f0", "not_deduplicated": "#f0e0b0"}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
RC: dict[str, Any] = {"font.size": FONT, "axes.titlesize": FONT + 1, "axes.labelsize": FONT, "xtick.labelsize": FONT,
      "ytick.labelsize": FONT, "legend.fontsize": FONT, "svg.fonttype": "none", "svg.hashsalt": "benchcheck"}


def _figure(w: float, h: float) -> Any:
    from matplotlib.figure import Figure

    # fixed margins: the constrained layout engine doubled the drawing time; the tight bounding box
    # at save time keeps every label inside the image
    fig = Figure(figsize=(w, h))
    fig.subplots_adjust(left=0.08, right=0.98, top=0.9, bottom=0.14, wspace=0.35, hspace=0.55)
    return fig


def _style() -> Any:
    import matplotlib

    return matplotlib.rc_context(RC)  # type: ignore[arg-type]  # its stubs list the keys as Literals


def _save(fig: Any, path: Path) -> Path:
    """SVG or PNG by the file's suffix, cropped to what is drawn (plus a margin)."""
    buf = io.BytesIO()
    with _style():
        if path.suffix == ".svg":
            fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.08, metadata={"Date": None})
        else:
            fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.08)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _integer_axis(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _rung_axis(axis: Any, values: Sequence[float]) -> None:
    """Ticks at the ladder's own values, written as plain numbers (a log scale keeps the spacing)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    vals = sorted({float(v) for v in values})
    axis.set_major_locator(FixedLocator(vals))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def _err(rates: Sequence[Rate]) -> list[list[float]]:
    """Error-bar lengths in percent points (clamped: float rounding can make them -1e-17)."""
    return [[max(0.0, 100 * ((r.value or 0.0) - (r.lo or 0.0))) for r in rates],
            [max(0.0, 100 * ((r.hi or 0.0) - (r.value or 0.0))) for r in rates]]


def _rates_panel(ax: Any, labels: Sequence[str], rates: Sequence[Rate], title: str) -> None:
    xs = list(range(len(rates)))
    vals = [100 * (r.value or 0.0) for r in rates]
    ax.bar(xs, vals, color=REMOVED_C, alpha=0.75)
    ax.errorbar(xs, vals, yerr=_err(rates), fmt="none", ecolor="black", capsize=3)
    ax.set_xticks(xs, labels)
    ax.set_ylim(0, 100)
    ax.set_ylabel("removed %")
    ax.set_title(title)


def _styled(fn: Any) -> Any:
    """Build the whole figure under :data:`RC` (matplotlib reads font sizes when text is made)."""
    import functools

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _style():
            return fn(*args, **kwargs)
    return run


@_styled
def bench_figure(path: Path, bench: str, steps: Sequence[int], rates: Mapping[int, Rate],
                 margins: Mapping[int, Sequence[float]], gold: Counter[int], picks: Counter[int]) -> Path:
    """One figure per benchmark: removal rate per step (95 % Wilson), answer positions (step 1),
    and a margin histogram per step that has margins, with the log 2 threshold."""
    shown = [s for s in steps if margins.get(s)]
    ncols = max(3, len(shown))
    fig = _figure(2.6 * ncols, 5.2)
    grid = fig.add_gridspec(2, ncols)
    _rates_panel(fig.add_subplot(grid[0, : ncols // 2]), [f"step {s}" for s in steps],
                 [rates.get(s, Rate(0, 0, None, None)) for s in steps], f"{bench}: removal rate, 95% interval")
    ax = fig.add_subplot(grid[0, ncols // 2:])
    k = max([*gold, *picks, 1]) + 1
    xs = list(range(k))
    ax.bar([x - 0.2 for x in xs], [gold.get(x, 0) for x in xs], width=0.4, color=GOLD, label="gold")
    ax.bar([x + 0.2 for x in xs], [picks.get(x, 0) for x in xs], width=0.4, color=PICK, label="model pick")
    ax.set_xticks(xs, [LETTERS[x] for x in xs])
    _integer_axis(ax.yaxis)
    ax.set_title("step 1 answer position (all permutations)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.12), ncols=2, frameon=False)  # above, never on a bar
    for j, s in enumerate(shown):
        ax = fig.add_subplot(grid[1, j])
        counts, edges = np.histogram(np.asarray(margins[s], dtype=float), bins=30)
        ax.stairs(counts, edges, fill=True, color="#707070")
        ax.axvline(LOG2, color=REMOVED_C, linestyle="--", linewidth=1)
        _integer_axis(ax.yaxis)
        ax.set_title(f"step {s} margin (n={len(margins[s])})")
        ax.set_xlabel("margin (nats)")
    if not shown:
        ax = fig.add_subplot(grid[1, :])
        ax.text(0.5, 0.5, "no margins yet", ha="center", va="center")
        ax.set_axis_off()
    return _save(fig, path)


@_styled
def funnel_figure(path: Path, funnel: Mapping[int, Mapping[str, int]], names: Mapping[int, str] | None = None) -> Path:
    """Per step, how the items that reached it ended there (stacked bars; step 0 when present)."""
    steps = sorted(funnel)
    names = names or {}
    fig = _figure(8, 0.42 * len(steps) + 1.3)
    ax = fig.add_subplot()
    left = [0] * len(steps)
    labels = [f"{s} {names.get(s, '')}".strip() for s in steps]
    for key, colour in FUNNEL_COLOURS.items():
        vals = [funnel[s].get(key, 0) for s in steps]
        if not any(vals):
            continue  # a category no step has gets no legend entry
        ax.barh(labels, vals, left=left, color=colour, label=key.replace("_", " "))
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    _integer_axis(ax.xaxis)
    ax.set_xlabel("items")
    ax.legend(ncols=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return _save(fig, path)


@_styled
def bench_removal_figure(path: Path, benches: Sequence[str], rates: Sequence[Rate]) -> Path:
    """Share of each benchmark's items removed by the chain (any step), with 95 % intervals."""
    order = sorted(range(len(benches)), key=lambda i: -(rates[i].value or 0.0))
    fig = _figure(8, 0.22 * len(benches) + 1.0)
    ax = fig.add_subplot()
    ys = list(range(len(order)))
    vals = [100 * (rates[i].value or 0.0) for i in order]
    ax.barh(ys, vals, xerr=_err([rates[i] for i in order]), color=REMOVED_C, alpha=0.75, ecolor="black", capsize=1.5)
    ax.set_yticks(ys, [benches[i] for i in order])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("removed % of screened items")
    return _save(fig, path)


@_styled
def ladder_figure(path: Path, bench: str, ladders: Mapping[str, Sequence[tuple[float, Rate]]],
                  plane: Sequence[tuple[float, float, float]]) -> Path:
    """Sweep accuracy along each ladder (with intervals), and the frames x short-side plane; every
    axis is marked at the rungs the sweep ran."""
    names = [n for n in ladders if ladders[n]]
    fig = _figure(3.4 * (len(names) + 1), 3.2)
    fig.subplots_adjust(wspace=0.45)
    grid = fig.add_gridspec(1, len(names) + 1)
    for j, name in enumerate(names):
        ax = fig.add_subplot(grid[0, j])
        pts = ladders[name]
        xs = [x for x, _ in pts]
        ys = [100 * (r.value or 0) for _, r in pts]
        ax.errorbar(xs, ys, yerr=_err([r for _, r in pts]), marker="o", capsize=3)
        ax.set_xscale("log")
        _rung_axis(ax.xaxis, xs)
        ax.set_ylim(0, 105)
        ax.set_title(name)
        ax.set_xlabel(name.split(" (")[0])
        ax.set_ylabel("accuracy %")
    ax = fig.add_subplot(grid[0, len(names)])
    if plane:
        sc = ax.scatter([p[0] for p in plane], [p[1] for p in plane], c=[100 * p[2] for p in plane], s=120,
                        cmap="viridis", vmin=0, vmax=100)
        fig.colorbar(sc, ax=ax, label="accuracy %")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _rung_axis(ax.xaxis, [p[0] for p in plane])
        _rung_axis(ax.yaxis, [p[1] for p in plane])
        ax.margins(0.15)
    ax.set_xlabel("frames")
    ax.set_ylabel("short side (px)")
    ax.set_title("pixels x frames")
    return _save(fig, path)


@_styled
def latency_figure(path: Path, latencies: Sequence[float]) -> Path:
    fig = _figure(6.5, 2.8)
    ax = fig.add_subplot()
    counts, edges = np.histogram(np.asarray(latencies, dtype=float), bins=40)
    ax.stairs(counts, edges, fill=True, color=PICK)
    _integer_axis(ax.yaxis)
    ax.set_xlabel("seconds per item (wall clock)")
    ax.set_ylabel("items")
    return _save(fig, path)
