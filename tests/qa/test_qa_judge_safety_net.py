"""A fault inside one judge call costs that item's verdict, never the judge stage.

Two replies crashed the whole stage before (an integer score past float's range, JSON nested past
the decoder's depth: tests/qa/test_audit_qa_*.py); the VLM stage already turned any exception of
one item into that item's error. Here a fault is injected into the verdict parser for one item's
reply (the only way to reach the net without a known bug), against a real judge server on
loopback: that item is a judge error naming the fault, the other is scored, both are recorded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from qa_servers import scripted_server

from benchcheck.masking import Masker
from benchcheck.qa import judge as judge_module
from benchcheck.qa.dataset import QAItem
from benchcheck.qa.judge import Judge, JudgeConfig
from benchcheck.qa.state import JudgeCache


def test_a_fault_in_one_verdict_is_that_items_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = judge_module.parse_verdict

    def faulty(text: str) -> object:
        if "broken" in text:
            raise RuntimeError("parser fault")
        return real(text)

    monkeypatch.setattr(judge_module, "parse_verdict", faulty)
    rules = [{"match": "Is it red", "reply": '{"score": 1, "reasoning": "broken"}'},
             {"match": "Is it blue", "reply": '{"score": 1, "reasoning": "same"}'}]
    items = [QAItem(i, q, "yes", "a.mp4", tmp_path / "a.mp4", ("llm_judge",))
             for i, q in (("red", "Is it red?"), ("blue", "Is it blue?"))]
    masker = Masker([])
    with scripted_server(tmp_path, "judge", rules) as url:
        judge = Judge(JudgeConfig(url, "judge", max_retries=0), JudgeCache(tmp_path, masker), masker)
        try:
            red, blue = asyncio.run(judge.judge_all([(items[0], "yes"), (items[1], "yes")]))
        finally:
            asyncio.run(judge.aclose())
    assert red.status == "error" and red.error == "internal: RuntimeError: parser fault"
    assert blue.status == "ok" and blue.score == 1.0
    rows = (tmp_path / JudgeCache(tmp_path, masker).path.name).read_text().splitlines()
    assert len(rows) == 2  # both verdicts recorded, the error too
