"""Text tables for ``items validate`` and ``items stats`` (pure)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Literal, Protocol

from benchcheck.items.load import LoadResult
from benchcheck.items.record import Item
from benchcheck.protocol import LETTERS

# The columns of ``items stats`` an item's video falls in: a video found, one not normalized yet
# (the file or key is there, the store does not hold it), one named and not found, no video named.
VideoCount = Literal["found", "not_normalized", "not_found", "none"]


class VideoOutcome(Protocol):
    """What ``stats_table`` reads of one item's video resolution (``video.resolve.Resolution``,
    which says which column its status counts in, so the rule stays with the resolver)."""

    @property
    def item(self) -> Item: ...

    @property
    def reason(self) -> str: ...

    @property
    def counted_as(self) -> VideoCount: ...


def _bench_of_problem_path(path: str) -> str:
    from pathlib import Path

    from benchcheck.items.load import bench_of_path

    return bench_of_path(Path(path))


# Above this share of bad records a file's trouble is usually one cause (a column map, an encoding),
# not a few broken items: say so before the per-item lines bury it.
BAD_SHARE_WARN = 0.05


# The parts of a message that differ per item: a quoted value, or a number standing alone (the 8 of
# "UTF-8" and the 2 of "a2" are parts of words, not values).
_VALUE = re.compile(r"'[^']*'|(?<![\w.-])-?\d+(?:\.\d+)?(?![\w.])")


# Where a message names another record (a duplicate's first file, and what to do about it): the
# kind ends before it, so one cause is one kind whichever file came first.
_ELSEWHERE = " (first in "


def _kind_of(message: str) -> tuple[str, ...]:
    """A problem's kind: its text around the values that differ per item."""
    return tuple(_VALUE.split(message.split(_ELSEWHERE)[0].strip()))


def _example(messages: Sequence[str]) -> str | None:
    """One message of a kind in full, where the kind leaves text out (the first record's file and
    the fix a duplicate id names): the one that says most, so a fix some of them name is shown."""
    tails = [m.strip() for m in messages if _ELSEWHERE in m]
    return max(tails, key=lambda m: len(m.split(_ELSEWHERE, 1)[1])) if tails else None


def _show_kind(messages: Sequence[str]) -> str:
    """Messages of one kind as one line: a value all of them share is shown, one that differs is "…"."""
    parts = [_VALUE.findall(m.split(_ELSEWHERE)[0].strip()) for m in messages]
    kind = _kind_of(messages[0])
    values = ["…" if len({p[i] for p in parts}) > 1 else parts[0][i] for i in range(len(kind) - 1)]
    return "".join(t for pair in zip(kind, [*values, ""], strict=True) for t in pair)


def bad_share_lines(result: LoadResult, threshold: float = BAD_SHARE_WARN) -> list[str]:
    """One line per file whose bad records exceed ``threshold``: count, share, the commonest cause
    (and one of its messages whole where the cause leaves text out, such as the fix it names)."""
    bad_rows: dict[str, set[str]] = defaultdict(set)
    kinds: dict[str, dict[tuple[str, ...], list[str]]] = defaultdict(lambda: defaultdict(list))
    for p in result.errors:
        if p.where != "0":
            bad_rows[p.path].add(p.where)
            kinds[p.path][_kind_of(p.message)].append(p.message)
    lines = []
    for path, n in result.records.items():
        bad = len(bad_rows.get(path, ()))
        if n and bad / n > threshold:
            messages = max(kinds[path].values(), key=len)
            example = _example(messages)
            lines.append(f"{_bench_of_problem_path(path)}: {bad} of {n} records are bad ({100 * bad / n:.1f}%) "
                         f"in {path}; most often: {_show_kind(messages)} ({len(messages)})"
                         + (f", e.g. {example}" if example else ""))
    return lines


def refused_benchmarks(result: LoadResult) -> list[str]:
    """One line per item file that was read and gave no item (every record refused, or the file
    itself): its benchmark is in no plan, so a run's summary, which names the benchmarks it
    worked, left it out without a word while the others ran. The line names it, its file, the
    commonest reason and the fix that reason names (a duplicate id's: ``items import --id-prefix``)."""
    loaded = {i.source_file for i in result.items}
    benches = {i.bench for i in result.items}
    lines = []
    for path, n in result.records.items():
        bench = _bench_of_problem_path(path)
        if path in loaded or bench in benches:  # some of it (or of its benchmark, in another file) loaded
            continue
        whole = next((p.message for p in result.errors if p.path == path and p.where == "0"), None)
        if whole is not None:
            lines.append(f"{bench}: not screened: {path} was refused: {whole}")
        else:
            kinds: dict[tuple[str, ...], list[str]] = defaultdict(list)
            for p in result.errors:
                if p.path == path:
                    kinds[_kind_of(p.message)].append(p.message)
            if not kinds:
                continue
            messages = max(kinds.values(), key=len)
            example = _example(messages)
            lines.append(f"{bench}: not screened: every one of its {n} records in {path} was refused; most often: "
                         f"{_show_kind(messages)} ({len(messages)})" + (f", e.g. {example}" if example else ""))
    return lines


def no_items_reason(result: LoadResult, paths: Sequence[str]) -> str:
    """One line for a load that gave no item: each file with its file-level reason, or its bad count."""
    why: dict[str, str] = {}
    for p in result.errors:
        if p.where == "0":
            why.setdefault(p.path, p.message.removesuffix(": no items"))
    bad = Counter(path for path, where in dict.fromkeys((p.path, p.where) for p in result.errors) if where != "0")
    files = [f"{path} ({why.get(path) or f'{bad[path]} of {n} records bad'})" for path, n in result.records.items()]
    return f"no items in {'; '.join(files) or ', '.join(paths)}"


def validation_table(result: LoadResult) -> str:
    """The bad-share lines first, then per benchmark: valid items, letter-screenable, open-format, bad
    (records with at least one error); then the total."""
    valid: Counter[str] = Counter(i.bench for i in result.items)
    mc: Counter[str] = Counter(i.bench for i in result.items if i.format == "mc")
    bad: Counter[str] = Counter(_bench_of_problem_path(path) for path, _ in
                                dict.fromkeys((p.path, p.where) for p in result.errors))
    lines = [*bad_share_lines(result), f"{'benchmark':<24} {'valid':>7} {'mc':>7} {'open':>6} {'bad':>5}"]
    for b in sorted(set(valid) | set(bad)):
        lines.append(f"{b:<24} {valid[b]:>7} {mc[b]:>7} {valid[b] - mc[b]:>6} {bad[b]:>5}")
    tv, tm, tb = sum(valid.values()), sum(mc.values()), sum(bad.values())
    lines.append(f"{'TOTAL':<24} {tv:>7} {tm:>7} {tv - tm:>6} {tb:>5}")
    return "\n".join(lines)


def stats_table(items: Sequence[Item], resolutions: Sequence[VideoOutcome] | None = None, shown: int = 5) -> str:
    """Per benchmark: items with a video found, not normalized yet, not found (the first ``shown``
    named), without a video; options per item; gold positions. ``resolutions``: one per item
    (``video.resolve``); without them, an item's ``video_id`` alone decides."""
    by: dict[str, list[Item]] = defaultdict(list)
    res: dict[str, list[VideoOutcome]] = defaultdict(list)
    for n, it in enumerate(items):
        by[it.bench].append(it)
        if resolutions is not None:
            res[it.bench].append(resolutions[n])
    lines = []
    for b in sorted(by):
        its = by[b]
        n_opts = Counter(len(i.options) for i in its)
        pos = Counter(i.answer for i in its if i.format == "mc")
        if resolutions is None:
            found = sum(1 for i in its if i.has_frames_source)
            pending = sum(1 for i in its if i.video_id and not i.has_frames_source)
            missing: list[VideoOutcome] = []
        else:
            found = sum(1 for r in res[b] if r.counted_as == "found")
            pending = sum(1 for r in res[b] if r.counted_as == "not_normalized")
            missing = [r for r in res[b] if r.counted_as == "not_found"]
        # Not normalized yet: the file or key is there, the store does not hold it (steps 2-6 say NO_VIDEO).
        lines.append(f"{b}: {len(its)} items, {found} with a video found, {pending} not normalized yet, "
                     f"{len(missing)} not found, {len(its) - found - pending - len(missing)} without a video")
        for r in missing[:shown]:
            lines.append(f"  not found: {r.item.item_id}: {r.reason}")
        if len(missing) > shown:
            lines.append(f"  not found: ... and {len(missing) - shown} more")
        lines.append("  options per item: " + ", ".join(f"{k}:{v}" for k, v in sorted(n_opts.items())))
        total = sum(pos.values()) or 1
        lines.append("  answer position:  " + ", ".join(
            f"{LETTERS[k]}:{v} ({100 * v / total:.0f}%)" for k, v in sorted(pos.items())))
    return "\n".join(lines)
