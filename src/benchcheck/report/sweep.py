"""The sweep section: read ``results/conditions_results.csv`` (tolerant), accuracy per benchmark x
condition, ladders, the pixels x frames plane and a verdict per benchmark.

The sweep's writer is built in parallel, so the reader accepts the column names either side may
use (``bench``/``benchmark``, ``correct``/``is_correct``, or a prediction beside a gold answer)
and a missing, empty or partial file gives a reason to show, never an exception. A row's status and
score are the sweep's own (``sweep.results.row_status``, ``row_correct``): no rule of the page's.

Every number the page shows about the sweep (accuracy per condition, the pixels and frames
effects, the verdict) comes from :mod:`benchcheck.sweep.analysis`, run on the same rows with the
settings the last ``sweep analyze`` of that folder wrote (``sweep_analysis_settings.json``), so the
page and ``sweep_summary.md`` show one interval per effect, computed and named the same way.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.records import NA
from benchcheck.report.stats import Rate, diff_interval
from benchcheck.sweep.results import answered, read_csv, row_correct, row_status

CSV_NAME = "conditions_results.csv"
BENCH_COLS = ("bench", "benchmark", "dataset")
ITEM_COLS = ("item_id", "id", "qid", "index")
COND_COLS = ("condition", "cond")
CORRECT_COLS = ("correct", "is_correct", "hit", "acc")
PRED_COLS = ("pred", "pred_letter", "parsed", "prediction", "answer_pred", "pred_answer")
GOLD_COLS = ("gold", "gold_letter", "answer", "target", "gt")
TEXT_COLS = ("raw", "output", "response", "generated", "text")
VIDEO_COLS = ("video_id", "video", "vid")
STORAGE_SHORT_SIDE = 720.0  # where `v_32` (storage resolution) sits on the short-side axis
_COND = re.compile(r"^v_(?:(?P<n>\d+)|fps(?P<fps>[\d.]+))(?:_s(?P<s>\d+))?$")


@dataclass(frozen=True, slots=True)
class SweepAnswer:
    condition: str
    pred: str | None
    correct: bool | None
    status: str


@dataclass(frozen=True, slots=True)
class Verdict:
    prefers: str  # pixels | frames | both | neither | undetermined (unknown: no analysis)
    pixels: tuple[float, float, float] | None  # the pixels effect (estimate, lo, hi)
    frames: tuple[float, float, float] | None  # the frames effect (estimate, lo, hi)
    reason: str = ""
    p_pixels: float | None = None
    p_frames: float | None = None
    could_be: tuple[str, ...] = ()  # what its effects' error rows, counted right or wrong, could make it


@dataclass(slots=True)
class SweepData:
    path: Path | None
    reason: str | None = None  # why there is nothing (or only part) to show
    rows: int = 0
    skipped: int = 0
    acc: dict[str, dict[str, Rate]] = field(default_factory=dict)  # bench -> condition -> accuracy
    answers: dict[str, dict[str, list[SweepAnswer]]] = field(default_factory=dict)  # bench -> item -> answers
    # bench -> condition -> reason -> rows: replies no rule could read (scored as wrong), and
    # conditions that could not apply to an item (status NA: not scored), each with its reason
    unparsed: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    na: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    # bench -> condition -> status -> rows that are no answer (``error``, ``timeout``): never scored,
    # counted by the analysis (``CondStats.error_statuses``), so the page counts what ``sweep analyze`` does
    errors: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # bench -> the analysis' verdict
    rule: str = ""  # the verdict rule and the interval's method, as sweep_summary.md prints them
    clustered_by: str = "video"  # "item" when the CSV has no video column

    @property
    def available(self) -> bool:
        return bool(self.acc)


def _pick(header: Sequence[str], names: Sequence[str]) -> str | None:
    low = {h.strip().lower(): h for h in header}
    return next((low[n] for n in names if n in low), None)


def find_csv(folder: Path) -> Path | None:
    for p in (folder / "results" / CSV_NAME, folder / CSV_NAME):
        if p.is_file():
            return p
    return None


def read_sweep(folder: Path | None) -> SweepData:
    if folder is None:
        return SweepData(None, "no sweep folder given (--sweep)")
    path = find_csv(folder)
    if path is None:
        return SweepData(None, f"no sweep results in {folder} (expected results/{CSV_NAME})")
    try:
        return _read_file(str(path), *_stamp(path))
    except OSError as e:
        return SweepData(path, f"{path}: {e}")


def _stamp(path: Path) -> tuple[int, int, int]:
    """What the cache of :func:`_read_file` keys on: the CSV's and the settings file's versions."""
    from benchcheck.sweep.report import SETTINGS_NAME

    st = path.stat()
    settings = path.parent / SETTINGS_NAME
    return st.st_mtime_ns, st.st_size, settings.stat().st_mtime_ns if settings.is_file() else -1


@functools.lru_cache(maxsize=4)
def _read_file(path_s: str, mtime_ns: int, size: int, settings_mtime_ns: int) -> SweepData:
    """The file's answers and the analysis of them (cached: the page asks twice per build)."""
    path = Path(path_s)
    data = SweepData(path)
    rows: list[dict[str, Any]] = []
    own = _own_rows(path)
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            cols = {k: _pick(header, names) for k, names in (("bench", BENCH_COLS), ("item", ITEM_COLS),
                    ("cond", COND_COLS), ("correct", CORRECT_COLS), ("pred", PRED_COLS), ("gold", GOLD_COLS),
                    ("text", TEXT_COLS), ("status", ("status",)), ("parse", ("parse", "parse_rule")),
                    ("meta", ("meta",)), ("video", VIDEO_COLS))}
            need = [k for k in ("bench", "item", "cond") if cols[k] is None]
            if need or (cols["correct"] is None and (cols["pred"] is None or cols["gold"] is None)):
                data.reason = (f"{path}: cannot read the sweep: no column for "
                               f"{', '.join(need) or 'correctness (correct, or pred + gold)'}; header: {header}")
                return data
            for row in reader:
                _add(data, rows, row, cols)
            data.clustered_by = "video" if cols["video"] else "item"
            if own:
                rows = _only_counted(data, own, cols)
    except (OSError, csv.Error) as e:
        data.reason = f"{path}: {e}"
    _analyze_into(data, rows)
    if not data.acc and data.reason is None:
        n_err = sum(sum(c.values()) for cs in data.errors.values() for c in cs.values())
        data.reason = f"{path}: no scored rows yet" + (f" ({n_err} error rows, no answer)" if n_err else "")
    return data


def _only_counted(data: SweepData, own: Sequence[Mapping[str, str]],
                  cols: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """Answers, unreadable replies, NA reasons and the rows to analyze from the rows that count
    (``read_csv``: a key's last row under its condition's spec), as ``sweep analyze`` takes them:
    an answer redone under a new spec, an item edited since or an error row then answered would
    otherwise be shown and counted twice. The file's row counts stay."""
    n, skipped = data.rows, data.skipped
    data.answers, data.unparsed, data.na, data.errors = {}, {}, {}, {}
    rows: list[dict[str, Any]] = []
    for row in own:
        _add(data, rows, row, cols)
    data.rows, data.skipped = n, skipped
    return rows


def _own_rows(path: Path) -> list[dict[str, str]]:
    """The rows as ``sweep analyze`` reads them, when the sweep can read the file (else none)."""
    try:
        return read_csv(path)
    except (OSError, ValueError):
        return []


def _analyze_into(data: SweepData, rows: list[dict[str, Any]]) -> None:
    from benchcheck.sweep.analysis import analyze, verdict_rule
    from benchcheck.sweep.report import read_settings

    if data.path is None or not rows:
        return
    settings = read_settings(data.path.parent)
    result = analyze(rows, settings)
    for c in result.conditions:
        i = c.accuracy
        if i.n:
            data.acc.setdefault(c.bench, {})[c.condition] = Rate(round(i.est * i.n), i.n, i.lo, i.hi)
        if c.errors:
            data.errors.setdefault(c.bench, {})[c.condition] = Counter(dict(c.error_statuses))

    def iv(i: Any) -> tuple[float, float, float] | None:
        return None if i is None else (i.est, i.lo, i.hi)

    data.verdicts = {v.bench: Verdict(v.verdict, iv(v.pixels), iv(v.frames), v.reason, v.p_pixels, v.p_frames,
                                      v.could_be) for v in result.verdicts}
    data.rule = verdict_rule(settings)
    if data.clustered_by == "item":
        data.rule += " This CSV has no video column: each item is its own cluster."


def _add(data: SweepData, rows: list[dict[str, Any]], row: Mapping[str, str | None],
         cols: Mapping[str, str | None]) -> None:
    def get(key: str) -> str:
        c = cols[key]
        v = row.get(c) if c else None
        return v.strip() if isinstance(v, str) else ""

    bench, item, cond = get("bench"), get("item"), get("cond")
    if not (bench and item and cond):
        data.skipped += 1
        return
    data.rows += 1
    # The row under the sweep's own column names, judged by the sweep's own rules (``row_status``,
    # ``row_correct``), which the analysis of these rows applies too: the page counts what
    # ``sweep analyze`` counts, and a row that is no answer (``error``) is never scored.
    named = {"bench": bench, "item_id": item, "condition": cond, "status": get("status"), "pred": get("pred"),
             "gold": get("gold"), "correct": get("correct"), "video_id": get("video") or None}
    status = row_status(named)
    if status == "unparsed":
        why = get("parse") or "no reason given"
        data.unparsed.setdefault(bench, {}).setdefault(cond, Counter())[why] += 1
    elif status == NA:
        data.na.setdefault(bench, {}).setdefault(cond, Counter())[_meta_reason(get("meta"))] += 1
    correct = bool(row_correct(named)) if answered(status) else None
    pred = get("pred") or get("text") or None
    data.answers.setdefault(bench, {}).setdefault(item, []).append(SweepAnswer(cond, pred, correct, status))
    rows.append(named)


def _meta_reason(meta: str) -> str:
    """An NA row's reason (``meta.reason``, e.g. ``too_short``: the video is shorter than the
    condition needs)."""
    import json

    try:
        m = json.loads(meta) if meta else {}
    except ValueError:
        return "no reason given"
    return str(m.get("reason") or "no reason given") if isinstance(m, dict) else "no reason given"


def reasons(c: Counter[str] | None) -> str:
    """``12 (no_rule 10, empty 2)``; ``0`` for none."""
    if not c:
        return "0"
    return f"{sum(c.values())} ({', '.join(f'{k} {v}' for k, v in c.most_common())})"


def totals(by_cond: dict[str, Counter[str]] | None) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in (by_cond or {}).values():
        out.update(c)
    return out


def parse_condition(name: str) -> tuple[float | None, float | None, float | None]:
    """(frames, fps, short side) of a condition name; storage resolution is ``STORAGE_SHORT_SIDE``."""
    m = _COND.match(name)
    if not m:
        return None, None, None
    n = float(m["n"]) if m["n"] else None
    fps = float(m["fps"]) if m["fps"] else None
    s = float(m["s"]) if m["s"] else STORAGE_SHORT_SIDE
    return n, fps, s


def ladders(acc: Mapping[str, Rate]) -> dict[str, list[tuple[float, Rate]]]:
    """Accuracy against short side (32 frames), fps (short side 224) and frame count (short side 224)."""
    out: dict[str, list[tuple[float, Rate]]] = {"short side (32 frames)": [], "fps (224 px)": [],
                                                 "frames (224 px)": []}
    for cond, rate in acc.items():
        n, fps, s = parse_condition(cond)
        if rate.n == 0:
            continue
        if n == 32 and s is not None:
            out["short side (32 frames)"].append((s, rate))
        if fps is not None and s == 224:
            out["fps (224 px)"].append((fps, rate))
        if n is not None and n > 1 and s == 224:
            out["frames (224 px)"].append((n, rate))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in out.items()}


def plane(acc: Mapping[str, Rate]) -> list[tuple[float, float, float]]:
    pts = []
    for cond, rate in acc.items():
        n, _, s = parse_condition(cond)
        if n is not None and s is not None and rate.value is not None:
            pts.append((n, s, rate.value))
    return pts


def verdict(acc: Mapping[str, Rate]) -> Verdict:
    """A rough verdict from accuracies alone (Newcombe's interval, items taken as independent), for
    a caller without the rows; the page shows :func:`analysis_verdicts` instead."""
    def d(a: str, b: str) -> tuple[float, float, float] | None:
        return diff_interval(acc[a], acc[b]) if a in acc and b in acc else None

    px, fr = d("v_32_s448", "v_32_s168"), d("v_128_s224", "v_8_s224")
    if px is None and fr is None:
        return Verdict("unknown", px, fr)
    up_p, up_f = bool(px and px[1] > 0), bool(fr and fr[1] > 0)
    prefers = "both" if up_p and up_f else "pixels" if up_p else "frames" if up_f else "neither"
    if not (up_p or up_f) and (px is None or fr is None):
        prefers = "unknown"
    return Verdict(prefers, px, fr)


def analysis_verdicts(path: Path | None) -> dict[str, Verdict]:
    """The sweep analysis' verdicts (``benchcheck.sweep.analysis``, the rule ``sweep analyze``
    prints, with its settings) for the CSV at ``path``; empty when it cannot be read."""
    if path is None:
        return {}
    try:
        return _read_file(str(path), *_stamp(path)).verdicts
    except OSError:
        return {}


def fmt_diff(d: tuple[float, float, float] | None) -> str:
    if d is None or any(math.isnan(x) for x in d):
        return "-"
    return f"{100 * d[0]:+.1f} pts [{100 * d[1]:+.1f}, {100 * d[2]:+.1f}]"
