"""The QA section: read what ``benchcheck qa run`` wrote (tolerant: a missing file is a reason)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.qa.outputs import EVALUATOR_JSON, LATENCY_JSON, SUMMARY_JSON


@dataclass(slots=True)
class QAData:
    folder: Path | None
    reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    scores: list[dict[str, Any]] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return bool(self.summary)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_qa(folder: Path | None) -> QAData:
    if folder is None:
        return QAData(None, "no QA folder given (--qa)")
    summary = _json(folder / SUMMARY_JSON)
    if not isinstance(summary, dict):
        return QAData(folder, f"{folder / SUMMARY_JSON}: missing or not a JSON object")
    data = QAData(folder, summary=summary)
    lat = _json(folder / LATENCY_JSON)
    if isinstance(lat, dict):
        # The histogram shows what the percentiles count: the items measured under the run's
        # --concurrency, when the file records it (answers reused from a run at another one are not).
        stats = lat.get("stats_over_successful_items")
        by_concurrency = isinstance(stats, dict) and "concurrency" in stats
        current = stats["concurrency"] if isinstance(stats, dict) and by_concurrency else None
        data.latencies = [float(i["latency_s"]) for i in lat.get("items", [])
                          if isinstance(i, dict) and i.get("status") == "ok"
                          and isinstance(i.get("latency_s"), int | float)
                          and (not by_concurrency or i.get("concurrency") == current)]
    kinds: Counter[str] = Counter()
    for e in summary.get("errors") or []:
        if isinstance(e, dict):
            kinds[f"{e.get('stage', '?')}: {e.get('kind') or 'unknown'}"] += 1
    data.errors_by_kind = dict(sorted(kinds.items()))
    ev = _json(folder / EVALUATOR_JSON)
    if isinstance(ev, dict):
        data.scores = [i for i in ev.get("eval_output_items", []) if isinstance(i, dict)][:500]
    return data
