"""Text tables for ``items validate`` and ``items stats`` (pure)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from benchcheck.items.load import LoadResult
from benchcheck.items.record import Item
from benchcheck.protocol import LETTERS


def _bench_of_problem_path(path: str) -> str:
    from pathlib import Path

    from benchcheck.items.load import bench_of_path

    return bench_of_path(Path(path))


def validation_table(result: LoadResult) -> str:
    """Per benchmark: valid items, letter-screenable, open-format, bad; then the total."""
    valid: Counter[str] = Counter(i.bench for i in result.items)
    mc: Counter[str] = Counter(i.bench for i in result.items if i.format == "mc")
    bad: Counter[str] = Counter(_bench_of_problem_path(p.path) for p in result.errors)
    lines = [f"{'benchmark':<24} {'valid':>7} {'mc':>7} {'open':>6} {'bad':>5}"]
    for b in sorted(set(valid) | set(bad)):
        lines.append(f"{b:<24} {valid[b]:>7} {mc[b]:>7} {valid[b] - mc[b]:>6} {bad[b]:>5}")
    tv, tm, tb = sum(valid.values()), sum(mc.values()), sum(bad.values())
    lines.append(f"{'TOTAL':<24} {tv:>7} {tm:>7} {tv - tm:>6} {tb:>5}")
    return "\n".join(lines)


def stats_table(items: Sequence[Item]) -> str:
    """Per benchmark: items, with video, options-per-item histogram, gold-position histogram."""
    by: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by[it.bench].append(it)
    lines = []
    for b in sorted(by):
        its = by[b]
        n_opts = Counter(len(i.options) for i in its)
        pos = Counter(i.answer for i in its if i.format == "mc")
        with_video = sum(1 for i in its if i.video_id)
        lines.append(f"{b}: {len(its)} items, {with_video} with a video")
        lines.append("  options per item: " + ", ".join(f"{k}:{v}" for k, v in sorted(n_opts.items())))
        total = sum(pos.values()) or 1
        lines.append("  answer position:  " + ", ".join(
            f"{LETTERS[k]}:{v} ({100 * v / total:.0f}%)" for k, v in sorted(pos.items())))
    return "\n".join(lines)
