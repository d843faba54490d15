"""From stored answers and verdicts to the run's numbers (pure).

Accuracy is the mean over scored items only; latency statistics cover items whose VLM call
succeeded only (a judge error keeps its item's latency), measured under the run's
``--concurrency``: a rerun under another concurrency reuses the earlier answers, whose latencies
were measured under other load, so they are counted apart (``n_other_concurrency``) and summed
up per concurrency (``latency_s_by_concurrency``), never mixed into the headline percentiles. An
error (VLM, judge, or a qa entry of the dataset that cannot run) is counted apart and never
enters the accuracy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from benchcheck.qa.dataset import EntryNote, QAItem
from benchcheck.qa.records import Judgement, VLMAnswer

PERCENTILES = (50, 90, 95, 99)
EXIT_OK = 0
EXIT_PRECONDITION = 2
EXIT_ITEM_ERRORS = 3

Outcome = Literal["scored", "unjudged", "vlm_error", "judge_error"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation between ranks (numpy's default)."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def latency_stats(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, p50/p90/p95/p99, min and max of wall-clock seconds."""
    stats: dict[str, float | int | None] = {
        "n": len(values),
        "mean": sum(values) / len(values) if values else None,
    }
    for q in PERCENTILES:
        stats[f"p{q}"] = percentile(values, q)
    stats["min"] = min(values) if values else None
    stats["max"] = max(values) if values else None
    return stats


UNRECORDED = "unrecorded"  # answers stored before their concurrency was recorded


def concurrency_label(concurrency: int | None) -> str:
    return UNRECORDED if concurrency is None else str(concurrency)


def latency_summary(answers: Sequence[VLMAnswer], concurrency: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The headline statistics over the ok answers measured under ``concurrency`` (with that
    concurrency and how many ok answers were measured under another one), and the statistics of
    every concurrency found, in increasing order, the unrecorded last."""
    ok = [a for a in answers if a.status == "ok"]
    current = [a.latency_s for a in ok if a.concurrency == concurrency]
    headline = {**latency_stats(current), "concurrency": concurrency, "n_other_concurrency": len(ok) - len(current)}
    found = sorted({a.concurrency for a in ok}, key=lambda c: (c is None, c or 0))
    by = {concurrency_label(c): latency_stats([a.latency_s for a in ok if a.concurrency == c]) for c in found}
    return headline, by


@dataclass(frozen=True, slots=True)
class ItemResult:
    """One selected item with its VLM answer and, when judged, the verdict."""

    item: QAItem
    answer: VLMAnswer
    judgement: Judgement | None

    @property
    def outcome(self) -> Outcome:
        if self.answer.status != "ok":
            return "vlm_error"
        if self.judgement is None:
            return "unjudged"
        return "scored" if self.judgement.status == "ok" else "judge_error"

    @property
    def score(self) -> float | None:
        return self.judgement.score if self.outcome == "scored" and self.judgement else None

    @property
    def error(self) -> str | None:
        if self.outcome == "vlm_error":
            return f"vlm: {self.answer.error}"
        if self.outcome == "judge_error" and self.judgement:
            return f"judge: {self.judgement.error}"
        return None


def _names(values: Iterable[str | None]) -> tuple[str | None, dict[str, int]]:
    """The single reported name (or all of them joined when they differ) and their counts."""
    counts = Counter(v for v in values if v)
    if not counts:
        return None, {}
    return ", ".join(sorted(counts)), dict(sorted(counts.items()))


def exit_code(results: Sequence[ItemResult], entry_errors: int = 0) -> int:
    """0 when every item is ok, 3 when any item errored (VLM, judge, or a qa entry that cannot run)."""
    bad = entry_errors > 0 or any(r.outcome in ("vlm_error", "judge_error") for r in results)
    return EXIT_ITEM_ERRORS if bad else EXIT_OK


def _entry_error(e: EntryNote) -> dict[str, Any]:
    return {"id": e.id, "entry": e.entry, "stage": "dataset", "kind": "dataset",
            "error": f"dataset entry {e.entry}: {e.why}"}


def build_summary(results: Sequence[ItemResult], *, dataset_entries: int, skipped: dict[str, int],
                  not_selected: int, settings: dict[str, Any], judge_model_requested: str | None,
                  judge_hint: str | None, skipped_entries: Sequence[EntryNote] = (),
                  entry_errors: Sequence[EntryNote] = ()) -> dict[str, Any]:
    """The content of ``summary.json``."""
    by = Counter(r.outcome for r in results)
    scores = [s for r in results if (s := r.score) is not None]
    latency, latency_by = latency_summary([r.answer for r in results], settings.get("concurrency"))
    model_served, models_served = _names(r.answer.model for r in results if r.answer.status == "ok")
    judge_model, judge_models = _names(
        r.judgement.judge_model for r in results if r.judgement and r.judgement.status == "ok"
    )
    errors = [
        {"id": r.item.id, "stage": "vlm" if r.outcome == "vlm_error" else "judge",
         "kind": r.answer.error_kind if r.outcome == "vlm_error" else "judge", "error": r.error}
        for r in results if r.error is not None
    ] + [_entry_error(e) for e in entry_errors]
    return {
        "schema_version": 1,
        "accuracy": sum(scores) / len(scores) if scores else None,
        "counts": {
            "dataset_entries": dataset_entries,
            "selected": len(results),
            "scored": by["scored"],
            "errors": by["vlm_error"] + by["judge_error"] + len(entry_errors),
            "vlm_errors": by["vlm_error"],
            "judge_errors": by["judge_error"],
            "unjudged": by["unjudged"],
            "dataset_errors": len(entry_errors),
            "skipped": sum(skipped.values()),
            "skipped_by_reason": dict(skipped),
            "not_selected_by_limit": not_selected,
        },
        "vlm_errors_by_kind": dict(sorted(Counter(
            r.answer.error_kind or "unknown" for r in results if r.outcome == "vlm_error").items())),
        "latency_s": latency,
        "latency_s_by_concurrency": latency_by,
        "model_served": model_served,
        "models_served": models_served,
        "judge_model": judge_model,
        "judge_models": judge_models,
        "judge_model_requested": judge_model_requested,
        "judge_hint": judge_hint,
        "errors": errors,
        "skipped_entries": [e.to_json() for e in skipped_entries],
        "settings": settings,
        "exit_code": exit_code(results, len(entry_errors)),
    }
