"""The five output files of a QA run, written whole (``benchcheck.atomic``) and masked.

- ``summary.json``: the run's numbers (see :func:`benchcheck.qa.summary.build_summary`).
- ``qa_evaluator_output.json``: ``{average_score, eval_output_items: [{id, score, reasoning}]}``,
  the shape of the NAT QA evaluator; an item that errored has ``score: null`` and its error as
  the reasoning, so a reader can never average it in as a zero.
- ``latency_summary.json``: per-item wall clock of the whole VLM call (frame decoding included)
  and the ``--concurrency`` it was measured under, plus the statistics (those of the run's
  concurrency, and those of each concurrency apart).
- ``workflow_output.json``: raw answers (NAT field names: ``question``, ``answer`` = reference,
  ``generated_answer``), with status, error, model and latency.
- ``summary.csv``: one header and one row of the headline numbers, so runs concatenate.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_text_atomic
from benchcheck.masking import Masker
from benchcheck.qa.summary import ItemResult

SUMMARY_JSON = "summary.json"
EVALUATOR_JSON = "qa_evaluator_output.json"
LATENCY_JSON = "latency_summary.json"
WORKFLOW_JSON = "workflow_output.json"
SUMMARY_CSV = "summary.csv"
OUTPUT_FILES = (SUMMARY_JSON, EVALUATOR_JSON, LATENCY_JSON, WORKFLOW_JSON, SUMMARY_CSV)

CSV_COLUMNS = (
    "dataset", "model_served", "judge_model", "judge_prompt_version", "num_frames", "concurrency", "selected",
    "scored", "errors", "vlm_errors", "judge_errors", "skipped", "accuracy", "latency_mean_s",
    "latency_p50_s", "latency_p90_s", "latency_p95_s", "latency_p99_s", "exit_code",
)


def evaluator_output(results: Sequence[ItemResult], average: float | None) -> dict[str, Any]:
    items = []
    for r in results:
        if r.outcome == "scored" and r.judgement is not None:
            items.append({"id": r.item.id, "score": r.score, "reasoning": r.judgement.reasoning})
        elif r.outcome == "unjudged":
            items.append({"id": r.item.id, "score": None, "reasoning": "not judged (--skip-judge)"})
        else:
            items.append({"id": r.item.id, "score": None, "reasoning": f"error: {r.error}"})
    return {"average_score": average, "eval_output_items": items}


def latency_output(results: Sequence[ItemResult], summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "stats_over_successful_items": summary["latency_s"],
        "stats_by_concurrency": summary["latency_s_by_concurrency"],
        "items": [
            {"id": r.item.id, "status": r.answer.status, "latency_s": r.answer.latency_s,
             "prep_s": r.answer.prep_s, "error_kind": r.answer.error_kind, "concurrency": r.answer.concurrency}
            for r in results
        ],
    }


def workflow_output(results: Sequence[ItemResult]) -> list[dict[str, Any]]:
    return [
        {"id": r.item.id, "question": r.item.question, "answer": r.item.ground_truth,
         "generated_answer": r.answer.answer, "video": r.item.video, "status": r.answer.status,
         "error": r.answer.error, "error_kind": r.answer.error_kind, "model": r.answer.model,
         "latency_s": r.answer.latency_s}
        for r in results
    ]


def summary_csv(summary: dict[str, Any]) -> str:
    lat = summary["latency_s"]
    counts = summary["counts"]
    settings = summary["settings"]
    row = {
        "dataset": settings.get("dataset"), "model_served": summary["model_served"],
        "judge_model": summary["judge_model"], "judge_prompt_version": settings.get("judge_prompt_version"),
        "num_frames": settings.get("num_frames"), "concurrency": lat.get("concurrency"),
        **{k: counts[k] for k in ("selected", "scored", "errors", "vlm_errors", "judge_errors", "skipped")},
        "accuracy": summary["accuracy"], "latency_mean_s": lat["mean"], "latency_p50_s": lat["p50"],
        "latency_p90_s": lat["p90"], "latency_p95_s": lat["p95"], "latency_p99_s": lat["p99"],
        "exit_code": summary["exit_code"],
    }
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def write_outputs(out_dir: Path, results: Sequence[ItemResult], summary: dict[str, Any],
                  redactor: Masker) -> list[Path]:
    """Write the five files; every string passes through the redactor first."""
    def dump(obj: Any) -> str:
        return json.dumps(redactor.value(obj), indent=2, ensure_ascii=False) + "\n"

    payloads = {
        SUMMARY_JSON: dump(summary),
        EVALUATOR_JSON: dump(evaluator_output(results, summary["accuracy"])),
        LATENCY_JSON: dump(latency_output(results, summary)),
        WORKFLOW_JSON: dump(workflow_output(results)),
        SUMMARY_CSV: redactor.text(summary_csv(summary)),
    }
    paths = []
    for name, text in payloads.items():
        write_text_atomic(out_dir / name, text)
        paths.append(out_dir / name)
    return paths
