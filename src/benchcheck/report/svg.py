"""Small inline SVG charts for the per-benchmark pages (pure string building).

Why not matplotlib here: a benchmark's panel set took 1.2-4.8 s in matplotlib on the 2-core dev
VM under its usual load, so the 139 benchmarks of the full pool would spend 3-11 minutes on
figures alone; these strings take about a millisecond each and stay crisp at any zoom.
matplotlib still draws the overview, sweep and QA figures, and the per-benchmark PNG on request
(``--bench-png``).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

W, H = 300, 170
PAD_L, PAD_R, PAD_T, PAD_B = 38, 8, 22, 30


def _num(v: float) -> str:
    if abs(v) >= 100 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.2g}" if abs(v) < 1 else f"{v:.1f}"


def _frame(title: str, ymax: float, ylabel: str) -> list[str]:
    h = H - PAD_T - PAD_B
    parts = [f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
             f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{W / 2}" y="14" text-anchor="middle" font-size="11">{escape(title)}</text>',
             f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{PAD_T + h}" stroke="#888"/>',
             f'<line x1="{PAD_L}" y1="{PAD_T + h}" x2="{W - PAD_R}" y2="{PAD_T + h}" stroke="#888"/>',
             f'<text x="{PAD_L - 3}" y="{PAD_T + 8}" text-anchor="end" font-size="9">{_num(ymax)}</text>',
             f'<text x="{PAD_L - 3}" y="{PAD_T + h}" text-anchor="end" font-size="9">0</text>',
             f'<text x="8" y="{PAD_T + h / 2}" font-size="9" transform="rotate(-90 8 {PAD_T + h / 2})" '
             f'text-anchor="middle">{escape(ylabel)}</text>']
    return parts


def bars(title: str, labels: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]],
         ymax: float | None = None, err: Sequence[tuple[float, float]] | None = None, ylabel: str = "") -> str:
    """Grouped bars: ``series`` = (name, colour, values); ``err`` = (lo, hi) per label for series 0."""
    top = ymax if ymax is not None else max([v for _, _, vals in series for v in vals] + [1e-9])
    h, w = H - PAD_T - PAD_B, W - PAD_L - PAD_R
    group = w / max(len(labels), 1)
    bw = group * 0.8 / max(len(series), 1)

    def y(v: float) -> float:
        return PAD_T + h - h * min(max(v / top, 0.0), 1.0)

    parts = _frame(title, top, ylabel)
    for j, lab in enumerate(labels):
        x0 = PAD_L + j * group + group * 0.1
        for s, (name, colour, vals) in enumerate(series):
            v = vals[j] if j < len(vals) else 0.0
            parts.append(f'<rect x="{x0 + s * bw:.1f}" y="{y(v):.1f}" width="{bw:.1f}" height="{PAD_T + h - y(v):.1f}"'
                         f' fill="{colour}"><title>{escape(name)} {escape(lab)}: {_num(v)}</title></rect>')
        if err is not None and j < len(err):
            cx = x0 + bw / 2
            lo, hi = err[j]
            parts.append(f'<line x1="{cx:.1f}" y1="{y(lo):.1f}" x2="{cx:.1f}" y2="{y(hi):.1f}" stroke="#000"/>')
        parts.append(f'<text x="{PAD_L + (j + 0.5) * group:.1f}" y="{H - PAD_B + 12}" text-anchor="middle" '
                     f'font-size="9">{escape(lab)}</text>')
    for s, (name, colour, _) in enumerate(series if len(series) > 1 else ()):
        parts.append(f'<rect x="{W - PAD_R - 80}" y="{PAD_T + 2 + 11 * s}" width="8" height="8" fill="{colour}"/>'
                     f'<text x="{W - PAD_R - 68}" y="{PAD_T + 10 + 11 * s}" font-size="9">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, counts: Sequence[int], edges: Sequence[float], vline: float | None = None,
              colour: str = "#707070") -> str:
    """Bars over bin edges, with an optional vertical marker (the log 2 threshold)."""
    if not counts:
        return bars(title, [], [])
    h, w = H - PAD_T - PAD_B, W - PAD_L - PAD_R
    top, lo, hi = max(max(counts), 1), edges[0], edges[-1]

    def x(v: float) -> float:
        return PAD_L + w * (v - lo) / (hi - lo)

    parts = _frame(title, top, "items")
    for c, a, b in zip(counts, edges[:-1], edges[1:], strict=True):
        if c:
            yy = PAD_T + h - h * c / top
            tip = f"{_num(a)}..{_num(b)}: {c}"
            parts.append(f'<rect x="{x(a):.1f}" y="{yy:.1f}" width="{max(x(b) - x(a) - 0.3, 0.5):.1f}" '
                         f'height="{PAD_T + h - yy:.1f}" fill="{colour}"><title>{tip}</title></rect>')
    if vline is not None and lo <= vline <= hi:
        parts.append(f'<line x1="{x(vline):.1f}" y1="{PAD_T}" x2="{x(vline):.1f}" y2="{PAD_T + h}" stroke="#c03030" '
                     f'stroke-dasharray="4 2"><title>log 2 = {vline:.3f}</title></line>')
    for v in (lo, hi):
        parts.append(f'<text x="{x(v):.1f}" y="{H - PAD_B + 12}" text-anchor="middle" font-size="9">{_num(v)}</text>')
    if vline is not None and lo <= vline <= hi:
        parts.append(f'<text x="{x(vline):.1f}" y="{H - PAD_B + 22}" text-anchor="middle" font-size="9" '
                     f'fill="#c03030">log 2</text>')
    parts.append("</svg>")
    return "".join(parts)


def lines(title: str, xs: Sequence[float], series: Sequence[tuple[str, str, Sequence[float]]],
          ymax: float | None = None, vline: tuple[float, str] | None = None, xlabel: str = "",
          ylabel: str = "") -> str:
    """Polylines over shared ``xs``: ``series`` = (name, colour, ys); ``vline`` = (x, label), a
    dashed marker (the log 2 threshold). Each point carries its value as a tooltip."""
    if not xs or not series:
        return bars(title, [], [])
    h, w = H - PAD_T - PAD_B, W - PAD_L - PAD_R
    top = ymax if ymax is not None else max([v for _, _, ys in series for v in ys] + [1e-9])
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return PAD_L + w * (v - lo) / span

    def y(v: float) -> float:
        return PAD_T + h - h * min(max(v / top, 0.0), 1.0)

    parts = _frame(title, top, ylabel)
    if vline is not None and lo <= vline[0] <= hi:
        parts.append(f'<line x1="{x(vline[0]):.1f}" y1="{PAD_T}" x2="{x(vline[0]):.1f}" y2="{PAD_T + h}" '
                     f'stroke="#c03030" stroke-dasharray="4 2"><title>{escape(vline[1])}</title></line>')
    for name, colour, ys in series:
        pts = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in zip(xs, ys, strict=False))
        parts.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}">'
                     f'<title>{escape(name)}</title></polyline>')
    for s, (name, colour, _) in enumerate(series[:8]):
        parts.append(f'<rect x="{W - PAD_R - 90}" y="{PAD_T + 2 + 11 * s}" width="8" height="8" fill="{colour}"/>'
                     f'<text x="{W - PAD_R - 78}" y="{PAD_T + 10 + 11 * s}" font-size="9">{escape(name[:14])}</text>')
    for v in (lo, hi):
        parts.append(f'<text x="{x(v):.1f}" y="{H - PAD_B + 12}" text-anchor="middle" font-size="9">{_num(v)}</text>')
    if xlabel:
        parts.append(f'<text x="{PAD_L + w / 2:.1f}" y="{H - 4}" text-anchor="middle" font-size="9">'
                     f'{escape(xlabel)}</text>')
    parts.append("</svg>")
    return "".join(parts)
