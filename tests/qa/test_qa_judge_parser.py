"""The judge's reply parser and the refusal hint (pure)."""

from __future__ import annotations

import pytest

from benchcheck.qa.judge import JudgeConfig, refusal_hint
from benchcheck.qa.judge_prompt import JUDGE_PROMPT_VERSION, judge_prompt, parse_judge_reply, strip_reasoning
from benchcheck.qa.records import Judgement


@pytest.mark.parametrize(("reply", "score"), [
    ("The answer matches.\n1", 1.0),
    ("Score: 0.75", 0.75),
    ("Final score: **0.5**.", 0.5),
    ("score 1.0", 1.0),
    ("Score: .25", 0.25),
    # Reasoning blocks are removed whatever they say.
    ("<think>This could be 0.9 or 1</think>\nWrong count.\nScore: 0", 0.0),
    ("<THINKING>\n1\n</THINKING>Partly right: 0.5", 0.5),
    ("<reasoning>score 1</reasoning>\n0.3", 0.3),
    # The opening tag was in the prompt: only the closing one comes back.
    ("the reference says 3 so 1 would be wrong</think>\nScore: 0", 0.0),
    # Several numbers on the last line: the last one in range wins.
    ("3 people vs 2 people, so 0", 0.0),
    ("The timestamp 12 s is within 5 s of 14 s: 1", 1.0),
    ("Score: 0.8 out of 1", 0.8),
    ("Score: 3/4", 0.75),
    ("Score: 80%", 0.8),
    # Earlier numbers on the last line do not matter, only its last one.
    ("Score 7 would be too much: 0.7", 0.7),
    ("Graded 2 of 3 facts.\nScore: 2/3", 2 / 3),
    # Numbers inside words, versions and dates are not scores.
    ("Graded with rubric v1.2 on 2024-01-05 by Qwen3\nScore: 0.2", 0.2),
])
def test_scores(reply: str, score: float) -> None:
    parsed = parse_judge_reply(reply)
    assert parsed.error is None
    assert parsed.score == pytest.approx(score)


@pytest.mark.parametrize("reply", [
    "",
    "I cannot grade this.",
    "Score: 5",
    "Score: -0.5",
    "<think>The score is 1</think>",
    "<think>cut off while reasoning 0.9",
    "Rated by Qwen3 with rubric v1",
    # The last line with a number decides even when it is out of range: an earlier in-range
    # number is not the verdict (a judge grading on another scale).
    "The candidate names 1 of the 2 people correctly.\nScore: 7",
    "Good answer, score 0.6\nConfidence: 95",
    "Score: 0.4\nScore: -1",
    "It is 1 of 2.\nScore: 7/10 points, 1 / 0",
])
def test_no_score_is_an_error(reply: str) -> None:
    parsed = parse_judge_reply(reply)
    assert parsed.score is None
    assert parsed.error is not None and "no score" in parsed.error


def test_reasoning_is_the_visible_text() -> None:
    parsed = parse_judge_reply("<think>secret thoughts</think>Counts differ.\n0")
    assert parsed.reasoning == "Counts differ.\n0"
    assert strip_reasoning("a<think>x</think>b<think>y</think>c") == "abc"


def test_prompt_holds_rubric_and_fields() -> None:
    p = judge_prompt(" How many? ", "3", "2 people")
    assert "Question: How many?" in p and "Reference answer: 3" in p and "Candidate answer: 2 people" in p
    assert "within 5 seconds" in p and "exactly" in p and "partial credit" in p
    assert JUDGE_PROMPT_VERSION


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
