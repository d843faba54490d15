"""Accuracy per benchmark x condition, paired differences, the pixels and frames effects and the
verdict per benchmark (pure: rows in, records out). The numbers come from
:mod:`benchcheck.sweep.verdict_stats`; docs/sweep.md has the measured error rates.

**Clustering.** Several items share one video, so every interval is clustered by video (the
``video_id`` column; a row without one is its own cluster). Differences between conditions are
paired by item: only items answered under both.

**Scoring.** Rows with status ``ok`` or ``unparsed`` count (``results.row_status``: a row without
one is ``ok``), scored by ``results.row_correct``; ``unparsed`` is wrong (and its rate is reported
on its own); ``NA`` rows are not items of that condition. Any other status is an error row
(``results.settles``: no answer): never scored, but counted per condition (``CondStats.errors``) and
named in the verdict of a benchmark whose effects use that condition, with whether the errored
items, counted right or wrong, could change it (:func:`bench_verdict`).

**Effects.** pixels = acc(``v_32_s448``, or ``v_32`` at storage resolution when s448 is absent) -
acc(``v_32_s168``), both 32 frames. frames = max(acc of ``v_128_s224`` and the fps conditions
present) - acc(``v_8_s224``), all at short side 224, on the items answered under every one of
them. The pixels effect's interval is a score interval, the frames interval's lower bound is
Bonferroni-simultaneous over its rungs (it pays for the max) and its upper bound the max of the
rungs' upper bounds at alpha (``verdict_stats``, "The verdict's two effects"; decision 136).

**Verdict** (:func:`verdict_rule` prints it): see :func:`decide`.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from benchcheck.records import NA
from benchcheck.sweep.results import row_correct, row_status, settles
from benchcheck.sweep.verdict_stats import (
    INTERVAL_METHOD,
    NAN_INTERVAL,
    PIXELS_METHOD,
    TEST_METHOD,
    Interval,
    accuracy_interval,
    difference_interval,
    max_effect_interval,
    per_video,
    permutation_pvalue,
    score_difference_interval,
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
        f"Intervals: {100 * (1 - s.alpha):g}% {INTERVAL_METHOD}; the pixels effect: {PIXELS_METHOD}; the frames "
        "effect spans [max of the rungs' lower bounds, Bonferroni-simultaneous over its rungs; max of the rungs' upper "
        f"bounds, each at {100 * (1 - s.alpha):g}%]. Test: {TEST_METHOD}, {s.n_perm} replicates, "
        f"seed {s.seed}, of the effect itself (the frames max over rungs included). An effect helps when its "
        f"p-value is <= {a} (alpha {s.alpha:g} split over the two effects) and its interval lies above 0; it is "
        f"flat when its interval lies inside (-{s.margin:g}, +{s.margin:g}) (the equivalence margin). both: pixels "
        "and frames help; pixels: pixels helps, frames does not; frames: frames helps, pixels does not; neither: "
        "both flat; undetermined: anything else, or an effect with fewer than "
        f"{s.min_videos} videos or {s.min_items} items, or a condition missing (the reason column says which). "
        "pixels effect = acc(v_32_s448, else v_32) - acc(v_32_s168); frames effect = max(acc v_128_s224, fps "
        "conditions) - acc(v_8_s224). Error rows (no answer) are left out of every score; where an effect's "
        "conditions have any, the reason counts them and says whether the verdict could change with them counted "
        "right or wrong (each effect recomputed with them right under its higher conditions and wrong under its "
        "base, the reverse, all right and all wrong)."
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
    # Rows that are no answer (``results.settles``: another tool's ``error``, ``timeout``): left out of
    # the accuracy, so it rests on the other items; by status, most first.
    error_statuses: tuple[tuple[str, int], ...] = ()

    @property
    def errors(self) -> int:
        return sum(n for _, n in self.error_statuses)


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
    # Error rows of the conditions its effects use (condition -> rows), and the other verdicts those
    # items could give, counted right or wrong (``bench_verdict``); empty when it has none.
    errors: tuple[tuple[str, int], ...] = ()
    could_be: tuple[str, ...] = ()

    def errors_matter(self) -> bool:
        return bool(self.could_be)


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

    def error_warnings(self) -> list[str]:
        """One line for every error row left out (how many, in how many benchmark x condition cells),
        then one per benchmark whose verdict those rows could change, counted right or wrong."""
        cells = [c for c in self.conditions if c.errors]
        if not cells:
            return []
        n = sum(c.errors for c in cells)
        most = min(cells, key=lambda c: (-c.errors, c.bench, c.condition))
        out = [f"{n} error row{'s' * (n != 1)} (no answer) in {len(cells)} benchmark x condition "
               f"cell{'s' * (len(cells) != 1)} left out of the scores, so those accuracies rest on the other items "
               f"(most: {most.bench} {most.condition}, {most.errors} errored beside {most.accuracy.n} answered); the "
               "errors columns count them, `sweep run` asks them again (not an item given up after three errors)"]
        out += [f"{v.bench}: its verdict {v.verdict} could be {' or '.join(v.could_be)} with the "
                f"{sum(k for _, k in v.errors)} error rows of its effects' conditions counted right or wrong"
                for v in self.verdicts if v.errors_matter()]
        return out


class BenchTable:
    """One benchmark's scores: condition -> item -> 0/1, and item -> video (cluster)."""

    def __init__(self, bench: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self.bench = bench
        self.scores: dict[str, dict[str, int]] = defaultdict(dict)
        self.unparsed: dict[str, int] = defaultdict(int)
        self.na: dict[str, int] = defaultdict(int)
        self.video: dict[str, str] = {}
        # condition -> item -> status of an error row (no answer: ``results.settles``), never scored
        self.errors: dict[str, dict[str, str]] = defaultdict(dict)
        error_video: dict[str, str] = {}
        for r in rows:
            cond, iid, status = str(r["condition"]), str(r["item_id"]), row_status(r)
            if status == NA:
                self.na[cond] += 1
                continue
            if not settles(status):
                self.errors[cond][iid] = status
                if r.get("video_id"):
                    error_video.setdefault(iid, str(r["video_id"]))
                continue
            self.scores[cond][iid] = row_correct(r)  # an answer: settled and not NA
            self.unparsed[cond] += status == "unparsed"
            self.video.setdefault(iid, str(r.get("video_id") or f"item:{iid}"))
        for cond, errs in list(self.errors.items()):  # rows of one key given twice: its answer counts
            kept = {i: st for i, st in errs.items() if i not in self.scores.get(cond, {})}
            if kept:
                self.errors[cond] = kept
            else:
                del self.errors[cond]
        # an errored item's video: its answers' (or its error row's), used only when it is counted (``filled``)
        self._error_video = {i: self.video.get(i) or error_video.get(i) or f"item:{i}"
                             for errs in self.errors.values() for i in errs}

    def error_statuses(self, cond: str) -> tuple[tuple[str, int], ...]:
        return tuple(Counter(self.errors.get(cond, {}).values()).most_common())

    def filled(self, right: Collection[str], wrong: Collection[str]) -> BenchTable:
        """This table with the error rows of the conditions in ``right`` counted right and of those in
        ``wrong`` counted wrong (every other condition as it is)."""
        t = BenchTable(self.bench, ())
        t.scores.update({c: dict(s) for c, s in self.scores.items()})
        t.unparsed.update(self.unparsed)
        t.na.update(self.na)
        t.video.update(self.video)
        for conds, score in ((right, 1), (wrong, 0)):
            for c in conds:
                for i in self.errors.get(c, {}):
                    t.scores[c][i] = score
                    t.video.setdefault(i, self._error_video[i])
        return t

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
    if name == "pixels":
        iv = score_difference_interval(m[:, 0], m[:, 1], cl, n_vid, s.alpha)
    elif len(present) == 1:
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


def _pixels(t: BenchTable, s: Settings) -> tuple[EffectResult, str | None]:
    pixels_hi = next((c for c in PIXELS_HI if t.scores.get(c)), None)
    return effect(t, "pixels", [pixels_hi] if pixels_hi else PIXELS_HI, PIXELS_LO, s), pixels_hi


def _frames(t: BenchTable, s: Settings) -> EffectResult:
    return effect(t, "frames", FRAMES_HI, FRAMES_LO, s)


def _fillings(hi: Sequence[str], lo: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(conditions counted right, counted wrong) of an effect's errored items: for the effect (its
    higher conditions right, its base wrong), against it, all right, all wrong."""
    every = (*hi, lo)
    return [(tuple(hi), (lo,)), ((lo,), tuple(hi)), (every, ()), ((), every)]


def error_verdicts(t: BenchTable, pix: EffectResult, frm: EffectResult, s: Settings = DEFAULT) -> set[str]:
    """The verdicts the benchmark could get with the error rows of its effects' conditions counted:
    each effect recomputed under each of its ``_fillings`` (only an effect whose conditions have error
    rows; their conditions are disjoint, so the two effects' fillings combine freely), ``decide`` on
    every pair."""
    pixels = [pix]
    if any(t.errors.get(c) for c in (*PIXELS_HI, PIXELS_LO)):
        pixels = [_pixels(t.filled(r, w), s)[0] for r, w in _fillings(PIXELS_HI, PIXELS_LO)]
    frames = [frm]
    if any(t.errors.get(c) for c in (*FRAMES_HI, FRAMES_LO)):
        frames = [_frames(t.filled(r, w), s) for r, w in _fillings(FRAMES_HI, FRAMES_LO)]
    return {decide(p, f, s)[0] for p in pixels for f in frames}


def _errors_note(errors: Sequence[tuple[str, int]], word: str, could_be: Sequence[str]) -> str:
    n = sum(k for _, k in errors)
    where = ", ".join(f"{c} {k}" for c, k in errors)
    then = (f"counted right or wrong they could make it {' or '.join(could_be)}" if could_be
            else f"counted right or wrong they leave it {word}")
    return f"errors: {n} row{'s' * (n != 1)} with no answer left out ({where}); {then}"


def bench_verdict(t: BenchTable, s: Settings = DEFAULT) -> BenchVerdict:
    pix, pixels_hi = _pixels(t, s)
    frm = _frames(t, s)
    word, reason = decide(pix, frm, s)
    errors = tuple((c, len(t.errors[c])) for c in (*PIXELS_HI, PIXELS_LO, *FRAMES_HI, FRAMES_LO) if t.errors.get(c))
    could_be: tuple[str, ...] = ()
    if errors:
        could_be = tuple(v for v in VERDICTS if v != word and v in error_verdicts(t, pix, frm, s))
        reason = f"{reason}; {_errors_note(errors, word, could_be)}"
    return BenchVerdict(t.bench, pix.interval, frm.interval, pixels_hi, word, reason, pix.p_value, frm.p_value,
                        frm.rungs, errors, could_be)


def analyze(rows: Iterable[Mapping[str, Any]], settings: Settings = DEFAULT) -> Analysis:
    """Every benchmark of the rows (see the module doc); deterministic for the settings."""
    s = settings
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by[str(r["bench"])].append(r)
    conds_out, diffs, verdicts = [], [], []
    for bench in sorted(by):
        t = BenchTable(bench, by[bench])
        for cond in sorted(set(t.scores) | set(t.na) | set(t.errors)):
            items = sorted(t.scores.get(cond, {}))
            acc = NAN_INTERVAL
            if items:
                n_vid, cl = t.clusters(items)
                acc = accuracy_interval(t.matrix(items, [cond])[:, 0], cl, n_vid, s.alpha)
            conds_out.append(CondStats(bench, cond, acc, t.unparsed.get(cond, 0), t.na.get(cond, 0),
                                       t.error_statuses(cond)))
        for a, b in PAIRS:
            items = t.common([a, b]) if t.scores.get(a) and t.scores.get(b) else []
            if items:
                n_vid, cl = t.clusters(items)
                m = t.matrix(items, [a, b])
                diffs.append((bench, a, b, difference_interval(m[:, 0], m[:, 1], cl, n_vid, s.alpha)))
        verdicts.append(bench_verdict(t, s))
    return Analysis(conds_out, diffs, verdicts, s)
