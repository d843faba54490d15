"""The judge's verdict parser on a corpus of awkward replies, through a real loopback judge; the
JSON-mode fallback, retries on replies without a verdict, and the refusal hint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from qa_servers import RecordingHost, completion, scripted_server

from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem
from benchcheck.qa.judge import Judge, JudgeConfig, refusal_hint
from benchcheck.qa.judge_prompt import JUDGE_PROMPT_VERSION, judge_prompt, parse_verdict, strip_reasoning
from benchcheck.qa.records import Judgement
from benchcheck.qa.state import JudgeCache
from loopback import thread_server

CORPUS: list[dict[str, Any]] = json.loads(Path(__file__).with_name("judge_replies.json").read_text())


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_parses_strictly(case: dict[str, Any]) -> None:
    parsed = parse_verdict(case["reply"])
    if case["score"] is None:
        assert parsed.score is None and parsed.error, parsed
    else:
        assert parsed.error is None and parsed.score == pytest.approx(case["score"])


def _items(n: int) -> list[QAItem]:
    return [QAItem(f"i{k:02d}", f"Question {k}?", "the reference", "a.mp4", Path("a.mp4"), ("qa",)) for k in range(n)]


async def _judge_all(url: str, tmp: Path, pairs: list[tuple[QAItem, str]], **kw: Any) -> tuple[list[Judgement], Judge]:
    judge = Judge(JudgeConfig(url, "judge-x", **kw), JudgeCache(tmp, Masker([])), Masker([]))
    try:
        return await judge.judge_all(pairs), judge
    finally:
        await judge.aclose()


def test_corpus_through_a_loopback_judge(tmp_path: Path) -> None:
    """Each reply of the corpus from the scripted engine behind ``benchcheck serve``: errors for the
    replies without a verdict (after the retries), the right score for the others."""
    items = _items(len(CORPUS))
    rules = [{"match": f"Candidate answer: case-{k:02d}\\b", "reply": c["reply"]} for k, c in enumerate(CORPUS)]
    with scripted_server(tmp_path, "judge-x", rules) as url:
        verdicts, _ = asyncio.run(_judge_all(url, tmp_path, [(it, f"case-{k:02d}") for k, it in enumerate(items)],
                                             max_retries=1))
    for case, v in zip(CORPUS, verdicts, strict=True):
        if case["score"] is None:
            assert v.status == "error" and v.score is None, case["name"]
            assert v.error is not None and "no verdict in 2 replies" in v.error, (case["name"], v.error)
        else:
            assert v.status == "ok" and v.score == pytest.approx(case["score"]), (case["name"], v)
            assert v.judge_model == "scripted:judge-x"


def test_a_reply_without_verdict_is_asked_again_up_to_the_limit(tmp_path: Path) -> None:
    items = _items(2)
    rules = [{"match": "case-late", "reply": "I think it is right.", "times": 3},
             {"match": "case-late", "reply": "SCORE: 1"},
             {"match": "case-never", "reply": "I think it is right.", "times": 4},
             {"match": "case-never", "reply": "SCORE: 1"}]
    with scripted_server(tmp_path, "judge-x", rules) as url:
        pairs = [(items[0], "case-late"), (items[1], "case-never")]
        (late, never), judge = asyncio.run(_judge_all(url, tmp_path, pairs))
    assert late.status == "ok" and late.score == 1.0  # the 4th reply: within 3 retries
    assert never.status == "error" and never.score is None and "no verdict in 4 replies" in (never.error or "")
    # Errors are recorded in the cache but never reused.
    rows = [json.loads(line) for line in (tmp_path / "judge_cache.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "error"] or [r["status"] for r in rows] == ["error", "ok"]
    assert judge.cache.load().keys() == {judge.key(items[0], "case-late")}


def test_json_mode_is_asked_and_a_refusing_endpoint_gets_the_score_line(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if "response_format" in body:
            return 400, {"error": {"message": "response_format is not supported by this model", "code": 400}}
        assert "SCORE: <a number from 0 to 1>" in body["messages"][-1]["content"][-1]["text"]
        return 200, completion("j", "Looks right.\nSCORE: 1")

    host = RecordingHost("j", reply)
    items = _items(3)
    with thread_server(host.app()) as url:
        verdicts, _ = asyncio.run(_judge_all(url, tmp_path, [(i, "x") for i in items], concurrency=1))
    assert [v.score for v in verdicts] == [1.0, 1.0, 1.0]
    chats = host.chats()
    assert chats[0]["response_format"] == {"type": "json_object"}
    assert '{"score": <a number from 0 to 1>' in chats[0]["messages"][-1]["content"][-1]["text"]
    # Requests already on their way when the first refusal came back are refused too; after it,
    # no request asks for JSON mode (the switch is remembered).
    modes = ["response_format" in c for c in chats]
    assert modes == sorted(modes, reverse=True) and modes.count(False) == 3

    # --judge-format json keeps asking for JSON: the refusal is the item's error.
    host2 = RecordingHost("j", reply)
    with thread_server(host2.app()) as url:
        (v,), _ = asyncio.run(_judge_all(url, tmp_path / "b", [(items[0], "x")], verdict_format="json"))
    assert v.status == "error" and v.http_status == 400


def test_reasoning_is_the_visible_text() -> None:
    parsed = parse_verdict("<think>secret thoughts</think>Counts differ.\nSCORE: 0")
    assert parsed.reasoning == "Counts differ.\nSCORE: 0"
    assert parse_verdict('{"score": 1, "reasoning": "Same."}').reasoning == "Same."
    assert strip_reasoning("a<think>x</think>b<think>y</think>c") == "abc"


def test_prompt_holds_rubric_and_fields() -> None:
    p = judge_prompt(" How many? ", "3", "2 people")
    assert "Question: How many?" in p and "Reference answer: 3" in p and "Candidate answer: 2 people" in p
    assert "within 5 seconds" in p and "exactly" in p and "partial credit" in p
    assert '{"score": <a number from 0 to 1>, "reasoning":' in p
    assert "SCORE: <a number from 0 to 1>" in judge_prompt("q", "r", "c", "line")
    assert JUDGE_PROMPT_VERSION == "qa-judge-v2"  # v1 cached the last-number parses


def _cfg() -> JudgeConfig:
    return JudgeConfig("https://gw.example/v1", "gpt-judge", "k" * 10)


def _refused(status: int, msg: str) -> Judgement:
    return Judgement("i", "error", error=msg, http_status=status)


def test_hint_needs_every_item_refused() -> None:
    cfg = _cfg()
    assert refusal_hint([_refused(403, "denied")] * 3, cfg, None) is not None
    hint = refusal_hint([_refused(400, "Invalid model name")] * 2, cfg, ["openai/gpt-judge", "x"])
    assert hint is not None and "GET https://gw.example/v1/models" in hint and "openai/gpt-judge" in hint
    assert refusal_hint([_refused(403, "denied"), Judgement("j", "ok", score=1.0)], cfg, None) is None
    assert refusal_hint([_refused(400, "bad messages field")], cfg, None) is None
    assert refusal_hint([_refused(400, "This model's maximum context length is 4096 tokens")], cfg, None) is None
    assert refusal_hint([_refused(400, "The model `gpt-judge` does not exist.")], cfg, None) is not None
    assert refusal_hint([_refused(500, "model broken")], cfg, None) is None
    assert refusal_hint([], cfg, None) is None


def test_a_key_refused_for_every_item_is_named_not_the_model_id() -> None:
    hint = refusal_hint([_refused(401, "Unauthorized")] * 3, _cfg(), None)
    assert hint is not None and "HTTP 401" in hint and "EVAL_LLM_JUDGE_API_KEY was not accepted" in hint
    assert "k" * 10 not in hint  # the key itself is never shown
    keyless = refusal_hint([_refused(401, "Unauthorized")], JudgeConfig("https://gw.example/v1", "gpt-judge"), None)
    assert keyless is not None and "EVAL_LLM_JUDGE_API_KEY is not set" in keyless
    assert refusal_hint([_refused(401, "Unauthorized"), Judgement("j", "ok", score=1.0)], _cfg(), None) is None


def test_hint_for_404_naming_the_model() -> None:
    """vLLM and most gateways answer an unknown model id with 404; a 404 for a wrong path is not it."""
    cfg = _cfg()
    hint = refusal_hint([_refused(404, "https://gw.example/v1: The model `gpt-judge` does not exist.")] * 2,
                        cfg, ["gpt-4o"])
    assert hint is not None and "HTTP 404" in hint and "gpt-4o" in hint
    assert refusal_hint([_refused(404, "model_not_found: no such model")], cfg, None) is not None
    mixed = [_refused(404, "The model `gpt-judge` does not exist."), _refused(403, "denied")]
    assert refusal_hint(mixed, cfg, None) is not None
    assert refusal_hint([_refused(404, "Not Found")], cfg, None) is None
    assert refusal_hint([_refused(404, "The path /v1/chat/completions does not exist")], cfg, None) is None


def test_judge_key_not_in_repr() -> None:
    assert "k" * 10 not in repr(_cfg())
