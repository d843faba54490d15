"""Accuracy per benchmark x condition, paired differences, the pixels and frames effects and the
verdict per benchmark (pure: rows in, records out). The numbers come from
:mod:`benchcheck.sweep.verdict_stats`; docs/sweep.md has the measured error rates.

**Clustering.** Several items share one video, so every interval is clustered by video (the
``video_id`` column; a row without one is its own cluster). Differences between conditions are
paired by item: only items answered under both.

**Scoring.** Rows with status ``ok`` or ``unparsed`` count (``results.row_status``: a row without
one is ``ok``), scored by ``results.row_correct``; ``unparsed`` is wrong (and its rate is reported
on its own); ``NA`` rows are not items of that condition.

**Effects.** pixels = acc(``v_32_s448``, or ``v_32`` at storage resolution when s448 is absent) -
acc(``v_32_s168``), both 32 frames. frames = max(acc of ``v_128_s224`` and the fps conditions
present) - acc(``v_8_s224``), all at short side 224, on the items answered under every one of
them. The frames interval is Bonferroni-simultaneous over its rungs, so it pays for the max.

**Verdict** (:func:`verdict_rule` prints it): see :func:`decide`.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from benchcheck.records import NA
from benchcheck.sweep.results import answered, row_correct, row_status
from benchcheck.sweep.verdict_stats import (
    INTERVAL_METHOD,
    NAN_INTERVAL,
    TEST_METHOD,
    Interval,
    accuracy_interval,
    difference_interval,
    max_effect_interval,
    per_video,
    permutation_pvalue,
)

__all__ = ["Analysis", "BenchVerdict", "CondStats", "EffectResult", "Interval", "Settings", "analyze", "decide",
           "verdict_rule"]

PIXELS_HI = ("v_32_s448", "v_32")
PIXELS_LO = "v_32_s168"
FRAMES_HI = ("v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224")
FRAMES_LO = "v_8_s224"
PAIRS = (("v_32_s224", "v_32_s168"), ("v_32_s336", "v_32_s224"), ("v_32_s448", "v_32_s336"), ("v_32", "v_32_s448"),
         ("v_32_s224", "v_8_s224"), ("v_128_s224", "v_32_s224"), ("v_fps0.5_s224", "v_fps0.25_s224"),
         ("v_fps1_s224", "v_fps0.5_s224"), ("v_fps2_s224", "v_fps1_s224"), ("v_32", "v_blind"), ("v_1", "v_blind"))
VERDICTS = ("both", "pixels", "frames", "neither", "undetermined")


@dataclass(frozen=True, slots=True)
class Settings:
    """What a verdict needs; the defaults are the documented ones (docs/sweep.md)."""

    n_perm: int = 2000  # permutation replicates of each effect's test
    seed: int = 0
    alpha: float = 0.05  # family-wise: each of the two effects is tested at alpha / 2
    margin: float = 0.05  # `neither`: both effects' intervals inside (-margin, +margin)
    min_videos: int = 10  # fewer videos behind an effect: undetermined
    min_items: int = 20  # fewer items behind an effect: undetermined

    def __post_init__(self) -> None:
        if self.n_perm < 1 or not 0 < self.alpha < 1 or not 0 < self.margin <= 1 or self.min_videos < 2 \
                or self.min_items < 1:
            raise ValueError(f"bad sweep analysis settings: {self}")

    @property
    def test_alpha(self) -> float:
        return self.alpha / 2


DEFAULT = Settings()


def verdict_rule(s: Settings = DEFAULT) -> str:
    """The rule, in words, as ``sweep_summary.md`` and the report print it."""
    a = f"{s.test_alpha:g}"
    return (
        f"Intervals: {100 * (1 - s.alpha):g}% {INTERVAL_METHOD}; the frames interval is Bonferroni-simultaneous "
        f"over its rungs and spans [max lower bound, max upper bound]. Test: {TEST_METHOD}, {s.n_perm} replicates, "
        f"seed {s.seed}, of the effect itself (the frames max over rungs included). An effect helps when its "
        f"p-value is <= {a} (alpha {s.alpha:g} split over the two effects) and its interval lies above 0; it is "
        f"flat when its interval lies inside (-{s.margin:g}, +{s.margin:g}) (the equivalence margin). both: pixels "
        "and frames help; pixels: pixels helps, frames does not; frames: frames helps, pixels does not; neither: "
        "both flat; undetermined: anything else, or an effect with fewer than "
        f"{s.min_videos} videos or {s.min_items} items, or a condition missing (the reason column says which). "
        "pixels effect = acc(v_32_s448, else v_32) - acc(v_32_s168); frames effect = max(acc v_128_s224, fps "
        "conditions) - acc(v_8_s224)."
    )


VERDICT_RULE = verdict_rule()


# A condition with at least this share of unparsed answers is named in a warning: a verdict can
# then rest on the replies' format (an engine whose replies at one resolution name no letter).
UNPARSED_WARN_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class CondStats:
    bench: str
    condition: str
    accuracy: Interval
    unparsed: int
    na: int


@dataclass(frozen=True, slots=True)
class EffectResult:
    """One effect of one benchmark: its interval and test, or why it has none."""

    name: str  # pixels | frames
    interval: Interval | None
    p_value: float | None
    problem: str | None  # not enough evidence (then the effect decides nothing)
    rungs: tuple[str, ...] = ()  # the high conditions compared with the base

    def helps(self, s: Settings) -> bool:
        return (self.problem is None and self.interval is not None and self.p_value is not None
                and self.p_value <= s.test_alpha and self.interval.lo > 0)

    def flat(self, s: Settings) -> bool:
        return (self.problem is None and self.interval is not None
                and -s.margin < self.interval.lo and self.interval.hi < s.margin)


@dataclass(frozen=True, slots=True)
class BenchVerdict:
    bench: str
    pixels: Interval | None
    frames: Interval | None
    pixels_hi: str | None
    verdict: str
    reason: str = ""
    p_pixels: float | None = None
    p_frames: float | None = None
    frames_rungs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Analysis:
    conditions: list[CondStats]
    diffs: list[tuple[str, str, str, Interval]]  # bench, a, b, acc(a) - acc(b)
    verdicts: list[BenchVerdict]
    settings: Settings = DEFAULT

    def unparsed_warnings(self) -> list[str]:
        """One line per condition whose answers are mostly unparsed. They count as wrong (the
        seeds' rule), so such a condition's accuracy, and any effect or verdict built on it,
        measures whether the engine's replies name a letter, not what the frames show."""
        return [f"{c.bench} {c.condition}: {c.unparsed} of {c.accuracy.n} answers unparsed (counted wrong): its "
                "accuracy and the effects built on it measure the replies' format, not the video; see the parse "
                "rules in docs/sweep.md" for c in self.conditions
                if c.accuracy.n and c.unparsed >= UNPARSED_WARN_SHARE * c.accuracy.n]


class BenchTable:
    """One benchmark's scores: condition -> item -> 0/1, and item -> video (cluster)."""

    def __init__(self, bench: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self.bench = bench
        self.scores: dict[str, dict[str, int]] = defaultdict(dict)
        self.unparsed: dict[str, int] = defaultdict(int)
        self.na: dict[str, int] = defaultdict(int)
        self.video: dict[str, str] = {}
        for r in rows:
            cond, iid, status = str(r["condition"]), str(r["item_id"]), row_status(r)
            if status == NA:
                self.na[cond] += 1
                continue
            if not answered(status):
                continue
            self.scores[cond][iid] = row_correct(r)
            self.unparsed[cond] += status == "unparsed"
            self.video.setdefault(iid, str(r.get("video_id") or f"item:{iid}"))

    def clusters(self, items: Sequence[str]) -> tuple[int, npt.NDArray[np.int64]]:
        vids = sorted({self.video[i] for i in items})
        pos = {v: j for j, v in enumerate(vids)}
        return len(vids), np.array([pos[self.video[i]] for i in items], dtype=np.int64)

    def common(self, conds: Sequence[str]) -> list[str]:
        sets = [set(self.scores.get(c, {})) for c in conds]
        return sorted(set.intersection(*sets)) if sets else []

    def matrix(self, items: Sequence[str], conds: Sequence[str]) -> npt.NDArray[np.float64]:
        return np.array([[self.scores[c][i] for c in conds] for i in items], dtype=np.float64).reshape(
            len(items), len(conds))


def _rng(s: Settings, bench: str, what: str) -> np.random.Generator:
    """One stream per (seed, benchmark, effect): a benchmark's p-values do not depend on the others."""
    return np.random.default_rng([s.seed, zlib.crc32(bench.encode()), zlib.crc32(what.encode())])


def effect(t: BenchTable, name: str, hi: Sequence[str], lo: str, s: Settings) -> EffectResult:
    """max over ``hi`` minus ``lo`` on the items answered under all of them, its interval and its
    permutation p-value, or the reason there is none."""
    present = tuple(c for c in hi if t.scores.get(c))
    if not present or not t.scores.get(lo):
        absent = [*([] if present else hi), *([] if t.scores.get(lo) else [lo])]
        na = sum(t.na[c] for c in absent)
        missing = [*([] if present else [" / ".join(hi)]), *([] if t.scores.get(lo) else [lo])]
        why = f" ({na} NA: videos too short for the condition)" if na else ""
        return EffectResult(name, None, None, f"no answered rows for {' and '.join(missing)}{why}")
    items = t.common([*present, lo])
    if not items:
        return EffectResult(name, None, None, f"no item answered under all of {', '.join([*present, lo])}", present)
    n_vid, cl = t.clusters(items)
    m = t.matrix(items, [*present, lo])
    if len(present) == 1:
        iv = difference_interval(m[:, 0], m[:, 1], cl, n_vid, s.alpha)
    else:
        iv = max_effect_interval(m[:, :-1], m[:, -1], cl, n_vid, s.alpha)[0]
    problem = None
    if n_vid < s.min_videos:
        problem = f"{n_vid} videos < {s.min_videos}"
    elif len(items) < s.min_items:
        problem = f"{len(items)} items < {s.min_items}"
    p = None
    if problem is None:
        sums, _ = per_video(m, cl, n_vid)
        p = permutation_pvalue(sums, float(len(items)), s.n_perm, _rng(s, t.bench, name))
    return EffectResult(name, iv, p, problem, present)


def _p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}")


def _why(e: EffectResult, s: Settings) -> str:
    if e.problem is not None or e.interval is None:
        return f"{e.name}: {e.problem}"
    i = e.interval
    where = f"{e.name} {i.est:+.3f} [{i.lo:+.3f}, {i.hi:+.3f}] p={_p(e.p_value)}"
    if e.helps(s):
        return f"{where}: helps"
    if e.p_value is not None and e.p_value <= s.test_alpha:
        return f"{where}: p <= {s.test_alpha:g} but the interval reaches 0"
    if e.flat(s):
        return f"{where}: flat (inside +-{s.margin:g})"
    return f"{where}: not shown to help, not inside +-{s.margin:g}"


def decide(pixels: EffectResult, frames: EffectResult, s: Settings = DEFAULT) -> tuple[str, str]:
    """(verdict, reason). An effect with too little evidence (or a missing condition) makes the
    verdict ``undetermined``; otherwise both / pixels / frames by which effects help (p-value at
    alpha/2 and interval above 0), ``neither`` when both intervals lie inside the margin, else
    ``undetermined``."""
    reason = "; ".join(_why(e, s) for e in (pixels, frames))
    if pixels.problem is not None or frames.problem is not None:
        return "undetermined", reason
    hp, hf = pixels.helps(s), frames.helps(s)
    if hp and hf:
        return "both", reason
    if hp:
        return "pixels", reason
    if hf:
        return "frames", reason
    if pixels.flat(s) and frames.flat(s):
        return "neither", reason
    return "undetermined", reason


def verdict(pixels: Interval | None, frames: Interval | None, p_pixels: float | None = 0.0,
            p_frames: float | None = 0.0, s: Settings = DEFAULT) -> str:
    """The rule on given intervals and p-values (None interval: a missing effect; the p-values
    default to 0, a passed test, so the interval rule can be checked alone)."""
    def res(name: str, iv: Interval | None, p: float | None) -> EffectResult:
        return EffectResult(name, iv, p, None if iv is not None else "missing")

    return decide(res("pixels", pixels, p_pixels), res("frames", frames, p_frames), s)[0]


def bench_verdict(t: BenchTable, s: Settings = DEFAULT) -> BenchVerdict:
    pixels_hi = next((c for c in PIXELS_HI if t.scores.get(c)), None)
    pix = effect(t, "pixels", [pixels_hi] if pixels_hi else PIXELS_HI, PIXELS_LO, s)
    frm = effect(t, "frames", FRAMES_HI, FRAMES_LO, s)
    word, reason = decide(pix, frm, s)
    return BenchVerdict(t.bench, pix.interval, frm.interval, pixels_hi, word, reason, pix.p_value, frm.p_value,
                        frm.rungs)


def analyze(rows: Iterable[Mapping[str, Any]], settings: Settings = DEFAULT) -> Analysis:
    """Every benchmark of the rows (see the module doc); deterministic for the settings."""
    s = settings
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by[str(r["bench"])].append(r)
    conds_out, diffs, verdicts = [], [], []
    for bench in sorted(by):
        t = BenchTable(bench, by[bench])
        for cond in sorted(set(t.scores) | set(t.na)):
            items = sorted(t.scores.get(cond, {}))
            acc = NAN_INTERVAL
            if items:
                n_vid, cl = t.clusters(items)
                acc = accuracy_interval(t.matrix(items, [cond])[:, 0], cl, n_vid, s.alpha)
            conds_out.append(CondStats(bench, cond, acc, t.unparsed.get(cond, 0), t.na.get(cond, 0)))
        for a, b in PAIRS:
            items = t.common([a, b]) if t.scores.get(a) and t.scores.get(b) else []
            if items:
                n_vid, cl = t.clusters(items)
                m = t.matrix(items, [a, b])
                diffs.append((bench, a, b, difference_interval(m[:, 0], m[:, 1], cl, n_vid, s.alpha)))
        verdicts.append(bench_verdict(t, s))
    return Analysis(conds_out, diffs, verdicts, s)
