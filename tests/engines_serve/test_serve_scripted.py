"""The scripted engine in process: rules, top lists, errors, delays, labels."""

from __future__ import annotations

import asyncio
import io
import json
import math
import time
from pathlib import Path

import pytest
from PIL import Image

from benchcheck.engines.base import Engine, Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.registry import create_engine
from benchcheck.engines.rules.scripted import RulesError, ScriptedEngine, estimate_tokens, jpeg_size, top_list
from benchcheck.protocol import letter_logprobs


def _jpeg(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 20, 30)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def test_registry_builds_it_and_it_is_labelled(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps([{"match": "", "reply": "x"}]))
    eng = create_engine("scripted", rules=p)
    assert isinstance(eng, Engine) and eng.model_name == "scripted"
    assert ScriptedEngine(p, name="judge").model_name == "scripted:judge"


def test_letters_become_a_sorted_top20_with_mass_at_most_one() -> None:
    eng = ScriptedEngine([{"match": "Q", "letters": {"A": -0.5, " B": -1.5, "(C": -3.0}}])
    [res] = asyncio.run(eng.score([ScoreRequest("r", "Q: which?")]))
    assert isinstance(res, LetterScores)
    assert len(res.top) == 20 and res.top1_token == "A"
    lps = [float(e["logprob"]) for e in res.top]
    assert lps == sorted(lps, reverse=True)
    assert sum(math.exp(v) for v in lps) <= 1.0 + 1e-9
    lp, missing, _ = letter_logprobs(res.top, 4)
    assert lp[:3] == [-0.5, -1.5, -3.0] and missing == ["D"]  # fillers never count as letters
    assert len(top_list({"A": -0.1}, 5)) == 5


def test_first_match_wins_times_and_delay_only_rules() -> None:
    eng = ScriptedEngine([
        {"match": "slow", "delay_s": 0.3},
        {"match": "busy", "error": {"status": 429, "message": "later"}, "times": 1},
        {"match": "ca.ital", "ignore_case": True, "reply": "Paris"},
        {"match": "", "reply": "default"},
    ])
    reqs = [GenerateRequest("a", "CAPITAL?"), GenerateRequest("b", "busy"), GenerateRequest("c", "busy")]
    a, b, c = asyncio.run(eng.generate(reqs))
    assert isinstance(a, Generation) and a.text == "Paris" and a.model == "scripted"
    assert isinstance(b, Failure) and (b.kind, b.status, b.message) == ("http", 429, "later")
    assert isinstance(c, Generation) and c.text == "default"
    t0 = time.perf_counter()
    [slow] = asyncio.run(eng.generate([GenerateRequest("d", "slow capital")]))
    assert time.perf_counter() - t0 >= 0.3 and isinstance(slow, Generation) and slow.text == "Paris"


def test_delays_of_one_batch_overlap() -> None:
    eng = ScriptedEngine([{"match": "", "delay_s": 0.3, "reply": "x"}])
    t0 = time.perf_counter()
    out = asyncio.run(eng.generate([GenerateRequest(str(i), "q") for i in range(10)]))
    assert all(isinstance(o, Generation) for o in out) and time.perf_counter() - t0 < 1.5


def test_no_match_is_a_failure_not_an_answer() -> None:
    eng = ScriptedEngine([{"match": "^only this$", "reply": "x"}])
    [res] = asyncio.run(eng.score([ScoreRequest("r", "something else")]))
    assert isinstance(res, Failure) and res.kind == "bad_request" and "no rule matches" in res.message


def test_error_kinds() -> None:
    eng = ScriptedEngine([
        {"match": "a", "error": {"status": 400, "message": "This model's maximum context length is 5 tokens."}},
        {"match": "b", "error": {"status": 403, "message": "nope"}},
        {"match": "c", "error": {"status": 500, "message": "boom"}},
    ])
    kinds = [(r.kind, r.status) for r in asyncio.run(eng.score([ScoreRequest(x, x) for x in "abc"]))
             if isinstance(r, Failure)]
    assert kinds == [("context_too_long", 400), ("bad_request", 403), ("http", 500)]


def test_prompt_tokens_count_images_and_context_limit() -> None:
    frame = _jpeg(448, 256)
    assert estimate_tokens("", [frame]) == 14 * 8 + 2
    eng = ScriptedEngine([{"match": "", "letters": {"A": -0.1}}], max_model_len=500)
    ok, too_long = asyncio.run(eng.score([ScoreRequest("a", "Q", (frame,) * 3), ScoreRequest("b", "Q", (frame,) * 5)]))
    assert isinstance(ok, LetterScores) and ok.prompt_tokens == 3 * 114 + estimate_tokens("QAnswer:")
    assert isinstance(too_long, Failure) and too_long.kind == "context_too_long"
    assert "maximum context length is 500 tokens" in too_long.message


@pytest.mark.parametrize(
    ("rules", "needle"),
    [
        ([{"reply": "x"}], "'match'"),
        ([{"match": "("}], "needs one of"),
        ([{"match": "(", "reply": "x"}], "bad regex"),
        ([{"match": "", "reply": "x", "colour": 1}], "unknown key"),
        ([{"match": "", "letters": {"A": 0.5}}], "<= 0"),
        ([{"match": "", "error": {"status": 200}}], "'error'"),
        ([{"match": "", "reply": "x", "times": 0}], "'times'"),
        ([], "non-empty"),
    ],
)
def test_bad_rules_name_the_rule(rules: list[dict[str, object]], needle: str, tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(rules))
    with pytest.raises(RulesError) as e:
        ScriptedEngine(p)
    assert needle in str(e.value) and str(p) in str(e.value)


def test_unreadable_rules_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.json"
    p.write_text("[{")
    with pytest.raises(RulesError, match=r"broken\.json"):
        ScriptedEngine(p)


def test_jpeg_size_reads_the_header_and_other_formats_fall_back() -> None:
    for w, h in ((448, 256), (17, 1000), (1, 1)):
        assert jpeg_size(_jpeg(w, h)) == (w, h)
    buf = io.BytesIO()
    Image.new("RGB", (64, 40)).save(buf, "PNG")
    assert jpeg_size(buf.getvalue()) is None and estimate_tokens("", [buf.getvalue()]) == 2 * 2 + 2
    assert jpeg_size(b"\xff\xd8\xff") is None
