"""Summary numbers (pure): percentiles, which items count where, exit codes; output shapes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem
from benchcheck.qa.outputs import OUTPUT_FILES, write_outputs
from benchcheck.qa.records import Judgement, VLMAnswer
from benchcheck.qa.summary import ItemResult, build_summary, exit_code, percentile


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=50),
       st.sampled_from([0, 50, 90, 95, 99, 100]))
def test_percentile_matches_numpy(values: list[float], q: int) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-9)


def test_percentile_of_nothing() -> None:
    assert percentile([], 50) is None


def _item(i: str) -> QAItem:
    return QAItem(i, f"q{i}", f"gt{i}", f"{i}.mp4", Path(f"/v/{i}.mp4"), ("qa",))


def _results() -> list[ItemResult]:
    return [
        ItemResult(_item("a"), VLMAnswer("a", "ok", 1.0, answer="x", model="vlm-a"),
                   Judgement("a", "ok", score=1.0, reasoning="r", judge_model="j1")),
        ItemResult(_item("b"), VLMAnswer("b", "ok", 3.0, answer="y", model="vlm-a"),
                   Judgement("b", "ok", score=0.25, reasoning="r", judge_model="j1")),
        ItemResult(_item("c"), VLMAnswer("c", "error", 62.0, error="killed by the watchdog", error_kind="watchdog"),
                   None),
        ItemResult(_item("d"), VLMAnswer("d", "ok", 2.0, answer="z", model="vlm-a"),
                   Judgement("d", "error", error="no score", judge_model="j1")),
    ]


def test_errors_never_enter_accuracy_or_latency() -> None:
    s = build_summary(_results(), dataset_entries=6, skipped={"not_qa": 2}, not_selected=0, settings={},
                      judge_model_requested="j", judge_hint=None)
    assert s["accuracy"] == pytest.approx(0.625)
    assert s["counts"] | {"skipped_by_reason": None} == {
        "dataset_entries": 6, "selected": 4, "scored": 2, "errors": 2, "vlm_errors": 1, "judge_errors": 1,
        "unjudged": 0, "dataset_errors": 0, "skipped": 2, "skipped_by_reason": None, "not_selected_by_limit": 0}
    # Latency over the three successful VLM calls (1, 3, 2 s), not the killed one (62 s).
    assert s["latency_s"]["n"] == 3 and s["latency_s"]["mean"] == pytest.approx(2.0)
    assert s["latency_s"]["p50"] == pytest.approx(2.0) and s["latency_s"]["max"] == 3.0
    assert s["model_served"] == "vlm-a" and s["judge_model"] == "j1"
    assert s["vlm_errors_by_kind"] == {"watchdog": 1}
    assert s["exit_code"] == 3


def test_exit_codes() -> None:
    ok = _results()[:2]
    assert exit_code(ok) == 0
    unjudged = [ItemResult(r.item, r.answer, None) for r in ok]
    assert exit_code(unjudged) == 0
    assert exit_code(_results()) == 3


def test_several_reported_models_are_all_named() -> None:
    rs = _results()[:2]
    rs.append(ItemResult(_item("e"), VLMAnswer("e", "ok", 1.0, answer="x", model="vlm-b"), None))
    s = build_summary(rs, dataset_entries=3, skipped={}, not_selected=0, settings={},
                      judge_model_requested=None, judge_hint=None)
    assert s["model_served"] == "vlm-a, vlm-b" and s["models_served"] == {"vlm-a": 2, "vlm-b": 1}


def test_output_files(tmp_path: Path) -> None:
    results = _results()
    s = build_summary(results, dataset_entries=4, skipped={}, not_selected=0,
                      settings={"dataset": "d.json", "vlm_cmd": "vlm --key topsecret-1234"},
                      judge_model_requested="j", judge_hint=None)
    write_outputs(tmp_path, results, s, Masker(["topsecret-1234"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(OUTPUT_FILES)
    ev = json.loads((tmp_path / "qa_evaluator_output.json").read_text())
    assert set(ev) == {"average_score", "eval_output_items"}
    assert [set(i) for i in ev["eval_output_items"]] == [{"id", "score", "reasoning"}] * 4
    assert [i["score"] for i in ev["eval_output_items"]] == [1.0, 0.25, None, None]
    wf = json.loads((tmp_path / "workflow_output.json").read_text())
    assert [w["generated_answer"] for w in wf] == ["x", "y", None, "z"]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "summary.csv").read_text())))
    assert rows[0]["accuracy"] == "0.625" and rows[0]["latency_p50_s"] == "2.0"
    assert "topsecret" not in (tmp_path / "summary.json").read_text()
    assert not list(tmp_path.glob(".*"))  # no temp files left behind
