"""Accuracy per benchmark x condition with bootstrap intervals clustered by video, paired
differences, the pixels and frames effects, and the verdict (pure: rows in, records out).

**Clustering.** Several items share one video, so items are not independent: every interval
resamples *videos* with replacement (all items of a drawn video come along), B = 2,000 times,
and reports the 2.5 / 97.5 percentiles (lmms-eval 0.6 clusters its standard errors the same
way). Differences between conditions are paired by item: only items answered under both, the
same resampled videos for both.

**Scoring.** Rows with status ``ok`` or ``unparsed`` count; ``unparsed`` is wrong (and its
rate is reported on its own); ``NA`` rows are not items of that condition.

**Effects.** pixels = acc(``v_32_s448``, or ``v_32`` at storage resolution when s448 is
absent) - acc(``v_32_s168``), both 32 frames. frames = max(acc of ``v_128_s224`` and the fps
conditions present) - acc(``v_8_s224``), all at short side 224, on the items answered under
every one of them; the max is re-taken inside every bootstrap replicate, so the interval pays
for choosing the best rung.

**Verdict** (:data:`VERDICT_RULE`), with a practical margin of 5 accuracy points: an effect
*helps* when its 95% interval lies above 0; it is *flat* when the interval lies inside
(-0.05, +0.05). both = pixels helps and frames helps; pixels = pixels helps, frames does not;
frames = frames helps, pixels does not; neither = both flat; otherwise (or a condition is
missing) ``undetermined``: the intervals are too wide for the items given.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

N_BOOT = 2000
MARGIN = 0.05
PIXELS_HI = ("v_32_s448", "v_32")
PIXELS_LO = "v_32_s168"
FRAMES_HI = ("v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224")
FRAMES_LO = "v_8_s224"
PAIRS = (("v_32_s224", "v_32_s168"), ("v_32_s336", "v_32_s224"), ("v_32_s448", "v_32_s336"), ("v_32", "v_32_s448"),
         ("v_32_s224", "v_8_s224"), ("v_128_s224", "v_32_s224"), ("v_fps0.5_s224", "v_fps0.25_s224"),
         ("v_fps1_s224", "v_fps0.5_s224"), ("v_fps2_s224", "v_fps1_s224"), ("v_32", "v_blind"), ("v_1", "v_blind"))
VERDICT_RULE = (
    "An effect helps when its 95% video-clustered bootstrap interval lies above 0, and is flat when the interval "
    f"lies inside (-{MARGIN:.2f}, +{MARGIN:.2f}). both: pixels and frames help; pixels: pixels helps, frames does "
    "not; frames: frames helps, pixels does not; neither: both flat; undetermined: anything else (intervals too "
    "wide for the items given, or a condition missing). pixels effect = acc(v_32_s448, else v_32) - acc(v_32_s168); "
    "frames effect = max(acc v_128_s224, fps conditions) - acc(v_8_s224), max re-taken per replicate."
)


@dataclass(frozen=True, slots=True)
class Interval:
    est: float
    lo: float
    hi: float
    n: int

    @property
    def helps(self) -> bool:
        return self.lo > 0

    @property
    def flat(self) -> bool:
        return self.lo > -MARGIN and self.hi < MARGIN


@dataclass(frozen=True, slots=True)
class CondStats:
    bench: str
    condition: str
    accuracy: Interval
    unparsed: int
    na: int


@dataclass(frozen=True, slots=True)
class BenchVerdict:
    bench: str
    pixels: Interval | None
    frames: Interval | None
    pixels_hi: str | None
    verdict: str


@dataclass(frozen=True, slots=True)
class Analysis:
    conditions: list[CondStats]
    diffs: list[tuple[str, str, str, Interval]]  # bench, a, b, acc(a) - acc(b)
    verdicts: list[BenchVerdict]


def _correct(r: Mapping[str, Any]) -> int:
    c = str(r.get("correct", "")).strip()
    if c in ("0", "1"):
        return int(c)
    if c.lower() in ("true", "false"):
        return int(c.lower() == "true")
    return int(str(r.get("status")) == "ok" and bool(r.get("pred")) and r.get("pred") == r.get("gold"))


class BenchTable:
    """One benchmark's scores: condition -> item -> 0/1, and item -> video (cluster)."""

    def __init__(self, bench: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self.bench = bench
        self.scores: dict[str, dict[str, int]] = defaultdict(dict)
        self.unparsed: dict[str, int] = defaultdict(int)
        self.na: dict[str, int] = defaultdict(int)
        self.video: dict[str, str] = {}
        for r in rows:
            cond, iid, status = str(r["condition"]), str(r["item_id"]), str(r.get("status", "ok") or "ok")
            if status == "NA":
                self.na[cond] += 1
                continue
            if status not in ("ok", "unparsed"):
                continue
            self.scores[cond][iid] = _correct(r)
            self.unparsed[cond] += status == "unparsed"
            self.video.setdefault(iid, str(r.get("video_id") or iid))

    def clusters(self, items: Sequence[str]) -> tuple[list[str], npt.NDArray[np.int64]]:
        vids = sorted({self.video[i] for i in items})
        pos = {v: j for j, v in enumerate(vids)}
        return vids, np.array([pos[self.video[i]] for i in items], dtype=np.int64)

    def common(self, conds: Sequence[str]) -> list[str]:
        sets = [set(self.scores.get(c, {})) for c in conds]
        return sorted(set.intersection(*sets)) if sets else []


def _weights(n_clusters: int, n_boot: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """B x n multiplicities of resampled clusters (a draw of n clusters with replacement)."""
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot).astype(np.float64)


def _interval(point: float, reps: npt.NDArray[np.float64], n: int) -> Interval:
    lo, hi = np.percentile(reps, [2.5, 97.5]) if reps.size else (point, point)
    return Interval(round(point, 6), round(float(lo), 6), round(float(hi), 6), n)


def _cluster_means(t: BenchTable, items: list[str], conds: Sequence[str], n_boot: int,
                   rng: np.random.Generator) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Point accuracies (len conds) and B x len(conds) bootstrap accuracies on the same items."""
    vids, cl = t.clusters(items)
    counts = np.bincount(cl, minlength=len(vids)).astype(np.float64)
    sums = np.stack([np.bincount(cl, weights=[t.scores[c][i] for i in items], minlength=len(vids))
                     for c in conds], axis=1)
    w = _weights(len(vids), n_boot, rng)
    point = sums.sum(axis=0) / counts.sum()
    reps = (w @ sums) / (w @ counts)[:, None]
    return point, reps


def effect(t: BenchTable, hi: Sequence[str], lo: str, n_boot: int, rng: np.random.Generator) -> Interval | None:
    """max over ``hi`` minus ``lo`` on the items answered under all of them (None if none)."""
    hi = [c for c in hi if t.scores.get(c)]
    if not hi or not t.scores.get(lo):
        return None
    items = t.common([*hi, lo])
    if not items:
        return None
    point, reps = _cluster_means(t, items, [*hi, lo], n_boot, rng)
    return _interval(float(point[:-1].max() - point[-1]), reps[:, :-1].max(axis=1) - reps[:, -1], len(items))


def verdict(pixels: Interval | None, frames: Interval | None) -> str:
    """The rule of :data:`VERDICT_RULE`."""
    if pixels is None or frames is None:
        return "undetermined"
    if pixels.helps and frames.helps:
        return "both"
    if pixels.helps:
        return "pixels"
    if frames.helps:
        return "frames"
    if pixels.flat and frames.flat:
        return "neither"
    return "undetermined"


def analyze(rows: Iterable[Mapping[str, Any]], n_boot: int = N_BOOT, seed: int = 0) -> Analysis:
    """Every benchmark of the rows (see the module doc); deterministic for a seed."""
    rng = np.random.default_rng(seed)
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by[str(r["bench"])].append(r)
    conds_out, diffs, verdicts = [], [], []
    for bench in sorted(by):
        t = BenchTable(bench, by[bench])
        for cond in sorted(set(t.scores) | set(t.na)):
            items = sorted(t.scores.get(cond, {}))
            if items:
                point, reps = _cluster_means(t, items, [cond], n_boot, rng)
                acc = _interval(float(point[0]), reps[:, 0], len(items))
            else:
                acc = Interval(float("nan"), float("nan"), float("nan"), 0)
            conds_out.append(CondStats(bench, cond, acc, t.unparsed.get(cond, 0), t.na.get(cond, 0)))
        for a, b in PAIRS:
            d = effect(t, [a], b, n_boot, rng)
            if d is not None:
                diffs.append((bench, a, b, d))
        pixels_hi = next((c for c in PIXELS_HI if t.scores.get(c)), None)
        pix = effect(t, [pixels_hi], PIXELS_LO, n_boot, rng) if pixels_hi else None
        frm = effect(t, FRAMES_HI, FRAMES_LO, n_boot, rng)
        verdicts.append(BenchVerdict(bench, pix, frm, pixels_hi, verdict(pix, frm)))
    return Analysis(conds_out, diffs, verdicts)
