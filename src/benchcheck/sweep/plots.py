"""PNG plots of a sweep analysis (matplotlib, headless): per benchmark accuracy against the short
side and against frames / fps, and one overview of every benchmark on the effects plane."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcheck.sweep.analysis import Analysis, CondStats

RESOLUTION = (("v_32_s168", "168"), ("v_32_s224", "224"), ("v_32_s336", "336"), ("v_32_s448", "448"),
              ("v_32", "stored"))
FRAMES = (("v_8_s224", "8"), ("v_32_s224", "32"), ("v_128_s224", "128"))
FPS = (("v_fps0.25_s224", "0.25"), ("v_fps0.5_s224", "0.5"), ("v_fps1_s224", "1"), ("v_fps2_s224", "2"))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(ax: Any, stats: dict[str, CondStats], rungs: Sequence[tuple[str, str]], label: str) -> None:
    xs, ys, lo, hi, names = [], [], [], [], []
    for j, (cond, name) in enumerate(rungs):
        s = stats.get(cond)
        if s is None or s.accuracy.n == 0 or math.isnan(s.accuracy.est):
            continue
        a = s.accuracy
        xs.append(j)
        ys.append(a.est)
        lo.append(a.est - a.lo)
        hi.append(a.hi - a.est)
        names.append(name)
    ax.set_xticks(range(len(rungs)), [n for _, n in rungs])
    if xs:
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def write_plots(a: Analysis, out: Path) -> dict[str, Path]:
    plt = _plt()
    paths: dict[str, Path] = {}
    for v in a.verdicts:
        stats = {c.condition: c for c in a.conditions if c.bench == v.bench}
        fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(12, 3.6))
        _series(ax1, stats, RESOLUTION, "32 frames")
        ax1.set(xlabel="short side (px)", ylabel="accuracy", title="resolution (32 frames)")
        _series(ax2, stats, FRAMES, "short side 224")
        ax2.set(xlabel="frames", title="frame count (224 px)")
        _series(ax3, stats, FPS, "short side 224")
        ax3.set(xlabel="fps", title="frame rate (224 px)")
        fig.suptitle(f"{v.bench}: {v.verdict}")
        fig.tight_layout()
        p = out / f"sweep_{_safe(v.bench)}.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        paths[f"plot {v.bench}"] = p
    fig, ax = plt.subplots(figsize=(6, 5))
    for v in a.verdicts:
        if v.pixels is None or v.frames is None:
            continue
        px, fr = v.pixels, v.frames
        ax.errorbar([px.est], [fr.est], xerr=[[px.est - px.lo], [px.hi - px.est]],
                    yerr=[[fr.est - fr.lo], [fr.hi - fr.est]], marker="o", capsize=2)
        ax.annotate(f"{v.bench} ({v.verdict})", (px.est, fr.est), textcoords="offset points", xytext=(4, 4),
                    fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set(xlabel="pixels effect (acc 448 - acc 168, 32 frames)", ylabel="frames effect (best of 128/fps - 8)",
           title="what each benchmark prefers")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    p = out / "sweep_overview.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths["overview"] = p
    return paths
