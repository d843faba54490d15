"""Small inline SVG charts for the per-benchmark and audit pages (pure string building).

Why not matplotlib here: a benchmark's panel set took 1.2-4.8 s in matplotlib on the 2-core dev
VM under its usual load, so the 139 benchmarks of the full pool would spend 3-11 minutes on
figures alone; these strings take about a millisecond each and stay crisp at any zoom.
matplotlib still draws the overview, sweep and QA figures, and the per-benchmark PNG on request
(``--bench-png``).

Legibility rules, kept here in one place: text is at least :data:`FONT` px; a legend sits in its
own band under the title, never over the data; a chart widens for its category labels and, when
they still do not fit, slants them and makes room below, so no label is ever cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

W, H = 300, 170  # the smallest chart; the plot area's height stays H - PAD_T0 - PAD_B0
PAD_L, PAD_R, PAD_T0, PAD_B0 = 42, 10, 22, 30
MAX_W = 620
FONT = 11  # tick labels, legend and axis titles
TITLE_FONT = 12
CHAR_W = 0.6 * FONT  # a generous estimate of one character's width (sans-serif)
LEGEND_ROW = FONT + 4
SLANT = 35  # degrees; category labels that do not fit lie at this angle


def _num(v: float) -> str:
    if abs(v) >= 100 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.2g}" if abs(v) < 1 else f"{v:.1f}"


def text_width(s: str, size: float = FONT) -> float:
    return len(s) * 0.6 * size


@dataclass(frozen=True, slots=True)
class Frame:
    """A chart's geometry: the plot area is (left, top) to (left + w, top + h)."""

    width: float
    height: float
    top: float
    w: float
    h: float
    left: float = PAD_L

    @property
    def bottom(self) -> float:
        return self.top + self.h


def _legend_rows(names: Sequence[str], width: float) -> list[list[int]]:
    rows: list[list[int]] = [[]]
    x = float(PAD_L)
    for i, n in enumerate(names):
        need = 14 + text_width(n) + 12
        if rows[-1] and x + need > width - PAD_R:
            rows.append([])
            x = float(PAD_L)
        rows[-1].append(i)
        x += need
    return rows if rows[0] else []


def _legend(series: Sequence[tuple[str, str]], width: float) -> tuple[list[str], float]:
    """The legend band under the title: (parts, its height)."""
    names = [n for n, _ in series]
    rows = _legend_rows(names, width)
    parts = []
    for r, row in enumerate(rows):
        x, y = float(PAD_L), PAD_T0 - 4 + r * LEGEND_ROW
        for i in row:
            name, colour = series[i]
            parts.append(f'<rect class="legend" x="{x:.1f}" y="{y:.1f}" width="10" height="10" fill="{colour}"/>'
                         f'<text x="{x + 14:.1f}" y="{y + 9:.1f}" font-size="{FONT}">{escape(name)}</text>')
            x += 14 + text_width(name) + 12
    return parts, len(rows) * LEGEND_ROW


def _open(title: str, frame: Frame) -> list[str]:
    return [f'<svg class="chart" viewBox="0 0 {frame.width:.0f} {frame.height:.0f}" width="{frame.width:.0f}" '
            f'height="{frame.height:.0f}" role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
            f'<text x="{frame.width / 2:.1f}" y="15" text-anchor="middle" font-size="{TITLE_FONT}">'
            f'{escape(title)}</text>']


def _axes(frame: Frame, ymax: float, ylabel: str, integer: bool = False) -> list[str]:
    """Axis lines, y ticks at 0, the middle and the top (the middle only when it is a whole
    number on an axis of counts), light grid lines, and the rotated y title."""
    f = frame
    parts = [f'<line x1="{f.left}" y1="{f.top:.1f}" x2="{f.left}" y2="{f.bottom:.1f}" stroke="#888"/>',
             f'<line x1="{f.left}" y1="{f.bottom:.1f}" x2="{f.left + f.w:.1f}" y2="{f.bottom:.1f}" stroke="#888"/>']
    ticks = [0.0, ymax]
    mid = ymax / 2
    if not integer or mid == int(mid):
        ticks.insert(1, mid)
    for t in ticks:
        y = f.bottom - f.h * (t / ymax if ymax else 0.0)
        if t:
            parts.append(f'<line x1="{f.left}" y1="{y:.1f}" x2="{f.left + f.w:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text class="ytick" x="{f.left - 3}" y="{y + FONT / 3:.1f}" text-anchor="end" '
                     f'font-size="{FONT}">{_num(t)}</text>')
    if ylabel:
        cy = f.top + f.h / 2
        parts.append(f'<text x="{FONT}" y="{cy:.1f}" font-size="{FONT}" transform="rotate(-90 {FONT} {cy:.1f})" '
                     f'text-anchor="middle">{escape(ylabel)}</text>')
    return parts


def _frame(n_cats: int, labels: Sequence[str], legend_h: float, extra_bottom: float = 0.0) -> tuple[Frame, bool]:
    """The chart's size for ``n_cats`` categories: wide enough for the labels if it can be
    (up to :data:`MAX_W`), else the labels slant and the chart grows downwards; (frame, slanted)."""
    longest = max((text_width(s) for s in labels), default=0.0)
    plot_w = min(max(W - PAD_L - PAD_R, n_cats * (longest + 8)), MAX_W - PAD_L - PAD_R)
    slanted = bool(labels) and longest + 4 > plot_w / max(n_cats, 1)
    h = H - PAD_T0 - PAD_B0
    below = PAD_B0 + extra_bottom
    if slanted:
        below = max(below, longest * math.sin(math.radians(SLANT)) + FONT + 10 + extra_bottom)
    top = PAD_T0 + legend_h + (4 if legend_h else 0)
    return Frame(PAD_L + plot_w + PAD_R, top + h + below, top, plot_w, h), slanted


def _cat_label(x: float, y: float, label: str, slanted: bool) -> str:
    if slanted:
        return (f'<text class="xtick" x="{x:.1f}" y="{y:.1f}" text-anchor="end" font-size="{FONT}" '
                f'transform="rotate(-{SLANT} {x:.1f} {y:.1f})">{escape(label)}</text>')
    return f'<text class="xtick" x="{x:.1f}" y="{y:.1f}" text-anchor="middle" font-size="{FONT}">{escape(label)}</text>'


def bars(title: str, labels: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]],
         ymax: float | None = None, err: Sequence[tuple[float, float]] | None = None, ylabel: str = "",
         integer: bool = False) -> str:
    """Grouped bars: ``series`` = (name, colour, values); ``err`` = (lo, hi) per label for series 0;
    ``integer``: the values are counts (no fractional tick)."""
    top = ymax if ymax is not None else max([v for _, _, vals in series for v in vals] + [1e-9])
    legend, legend_h = _legend([(n, c) for n, c, _ in series], W) if len(series) > 1 else ([], 0.0)
    frame, slanted = _frame(len(labels), labels, legend_h)
    if len(series) > 1 and frame.width > W:  # a wider chart may fit the legend in fewer rows
        legend, legend_h2 = _legend([(n, c) for n, c, _ in series], frame.width)
        if legend_h2 != legend_h:
            frame, slanted = _frame(len(labels), labels, legend_h2)
    h, w = frame.h, frame.w
    group = w / max(len(labels), 1)
    bw = group * 0.8 / max(len(series), 1)

    def y(v: float) -> float:
        return frame.top + h - h * min(max(v / top, 0.0), 1.0)

    parts = _open(title, frame) + legend + _axes(frame, top, ylabel, integer)
    for j, lab in enumerate(labels):
        x0 = PAD_L + j * group + group * 0.1
        for s, (name, colour, vals) in enumerate(series):
            v = vals[j] if j < len(vals) else 0.0
            parts.append(f'<rect x="{x0 + s * bw:.1f}" y="{y(v):.1f}" width="{bw:.1f}" '
                         f'height="{frame.bottom - y(v):.1f}" fill="{colour}"><title>{escape(name)} {escape(lab)}: '
                         f'{_num(v)}</title></rect>')
        if err is not None and j < len(err):
            cx = x0 + bw / 2
            lo, hi = err[j]
            parts.append(f'<line x1="{cx:.1f}" y1="{y(lo):.1f}" x2="{cx:.1f}" y2="{y(hi):.1f}" stroke="#000"/>')
        cx = PAD_L + (j + 0.5) * group
        parts.append(_cat_label(cx + (FONT / 3 if slanted else 0), frame.bottom + FONT + 3, lab, slanted))
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, counts: Sequence[int], edges: Sequence[float], vline: float | None = None,
              colour: str = "#707070", xlabel: str = "") -> str:
    """Bars over bin edges, with an optional vertical marker (the log 2 threshold; drawn when the
    edges span it) and an x-axis title under the ticks."""
    if not counts:
        return bars(title, [], [])
    frame, _ = _frame(0, [], 0.0, extra_bottom=(10 if vline is not None else 0.0) + (FONT + 4 if xlabel else 0.0))
    h, w = frame.h, frame.w
    top, lo, hi = max(max(counts), 1), edges[0], edges[-1]

    def x(v: float) -> float:
        return PAD_L + w * (v - lo) / (hi - lo)

    parts = _open(title, frame) + _axes(frame, top, "items", integer=True)
    for c, a, b in zip(counts, edges[:-1], edges[1:], strict=True):
        if c:
            yy = frame.bottom - h * c / top
            tip = f"{_num(a)}..{_num(b)}: {c}"
            parts.append(f'<rect x="{x(a):.1f}" y="{yy:.1f}" width="{max(x(b) - x(a) - 0.3, 0.5):.1f}" '
                         f'height="{frame.bottom - yy:.1f}" fill="{colour}"><title>{tip}</title></rect>')
    marked = vline is not None and lo <= vline <= hi
    if vline is not None and marked:
        parts.append(f'<line x1="{x(vline):.1f}" y1="{frame.top:.1f}" x2="{x(vline):.1f}" y2="{frame.bottom:.1f}" '
                     f'stroke="#c03030" stroke-dasharray="4 2"><title>log 2 = {vline:.3f}</title></line>')
    for v, anchor in ((lo, "start"), (hi, "end")):
        parts.append(f'<text class="xtick" x="{x(v):.1f}" y="{frame.bottom + FONT + 3:.1f}" text-anchor="{anchor}" '
                     f'font-size="{FONT}">{_num(v)}</text>')
    if vline is not None and marked:
        # Centred under the line, unless that would cross the chart's edge (the range may end at log 2).
        half, at = text_width("log 2") / 2, x(vline)
        anchor = "end" if at + half > frame.width else "start" if at - half < 0 else "middle"
        parts.append(f'<text x="{at:.1f}" y="{frame.bottom + 2 * FONT + 6:.1f}" text-anchor="{anchor}" '
                     f'font-size="{FONT}" fill="#c03030">log 2</text>')
    if xlabel:
        parts.append(f'<text x="{PAD_L + w / 2:.1f}" y="{frame.height - 5:.1f}" text-anchor="middle" '
                     f'font-size="{FONT}">{escape(xlabel)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def lines(title: str, xs: Sequence[float], series: Sequence[tuple[str, str, Sequence[float]]],
          ymax: float | None = None, vline: tuple[float, str] | None = None, xlabel: str = "",
          ylabel: str = "", vtext: str = "log 2") -> str:
    """Polylines over shared ``xs``: ``series`` = (name, colour, ys); ``vline`` = (x, tooltip), a
    dashed marker (the log 2 threshold) named on the chart by ``vtext`` (a tooltip alone is not
    seen in print or on a phone). Each point carries its value as a tooltip."""
    if not xs or not series:
        return bars(title, [], [])
    legend, legend_h = _legend([(n, c) for n, c, _ in series], W)
    frame, _ = _frame(0, [], legend_h, extra_bottom=FONT + 4 if xlabel else 0.0)
    h, w = frame.h, frame.w
    top = ymax if ymax is not None else max([v for _, _, ys in series for v in ys] + [1e-9])
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return PAD_L + w * (v - lo) / span

    def y(v: float) -> float:
        return frame.top + h - h * min(max(v / top, 0.0), 1.0)

    parts = _open(title, frame) + legend + _axes(frame, top, ylabel)
    if vline is not None and lo <= vline[0] <= hi:
        parts.append(f'<line x1="{x(vline[0]):.1f}" y1="{frame.top:.1f}" x2="{x(vline[0]):.1f}" '
                     f'y2="{frame.bottom:.1f}" stroke="#c03030" stroke-dasharray="4 2"><title>{escape(vline[1])}'
                     f'</title></line>')
        # Beside the line on the side with room: a marker near the right edge is named to its left.
        at = x(vline[0])
        right = at + 3 + text_width(vtext) <= frame.left + frame.w
        anchor = "" if right else ' text-anchor="end"'
        parts.append(f'<text class="vtext" x="{at + 3 if right else at - 3:.1f}" y="{frame.top + FONT:.1f}" '
                     f'font-size="{FONT}" fill="#c03030"{anchor}>{escape(vtext)}</text>')
    for name, colour, ys in series:
        pts = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in zip(xs, ys, strict=False))
        parts.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}">'
                     f'<title>{escape(name)}</title></polyline>')
    for v, anchor in ((lo, "start"), (hi, "end")):
        parts.append(f'<text class="xtick" x="{x(v):.1f}" y="{frame.bottom + FONT + 3:.1f}" text-anchor="{anchor}" '
                     f'font-size="{FONT}">{_num(v)}</text>')
    if xlabel:
        parts.append(f'<text x="{PAD_L + w / 2:.1f}" y="{frame.height - 5:.1f}" text-anchor="middle" '
                     f'font-size="{FONT}">{escape(xlabel)}</text>')
    parts.append("</svg>")
    return "".join(parts)
