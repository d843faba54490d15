"""``logprob_token_ids`` through ``benchcheck serve``: the openai engine asks for every letter
variant's exact log-prob where the server supports it, and says in the answer which it was."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_fixtures import cli_server, post_chat

from benchcheck.engines.base import LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.openai.client import OpenAIEngine
from benchcheck.protocol import build_prompt, letter_logprobs


@pytest.fixture(scope="module")
def hf_url(tiny_model: Path) -> Iterator[str]:
    with cli_server("--model", str(tiny_model), "--served-model-name", "tiny-vl", "--device", "cpu") as (url, _):
        yield url


def test_served_lp_exact_equals_in_process(tiny_model: Path, hf_url: str) -> None:
    local = HFEngine(tiny_model, device="cpu", dtype="float32")
    reqs = [ScoreRequest(f"r{k}", build_prompt("Answer.", f"question {k}?", [f"o{j}" for j in range(k)]))
            for k in (2, 4, 5)]

    async def go() -> list[LetterScores]:
        served = OpenAIEngine([hf_url], "tiny-vl", timeout_s=300, letter_token_ids=local.letters.ids)
        try:
            assert await served.exact_supported()
            out = await served.score(reqs)
            assert served._exact_ok == {served.endpoint_urls[0]: True}  # asked once, then kept
            return [r for r in out if isinstance(r, LetterScores)]
        finally:
            await served.aclose()

    served = asyncio.run(go())
    mine = local.score_sync(reqs)
    assert len(served) == 3
    for s, m, k in zip(served, mine, (2, 4, 5), strict=True):
        assert isinstance(m, LetterScores) and s.exact_source == "logprob_token_ids"
        assert letter_logprobs(s.exact, k)[0] == pytest.approx(letter_logprobs(m.exact, k)[0], abs=1e-4)
        assert letter_logprobs(s.top, k)[0] == pytest.approx(letter_logprobs(m.top, k)[0], abs=1e-4)


def test_serve_logprob_token_ids_shape_and_errors(hf_url: str) -> None:
    base = {"model": "tiny-vl", "messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "Answer:"}],
            "max_tokens": 1, "logprobs": True, "top_logprobs": 20, "continue_final_message": True,
            "add_generation_prompt": False, "temperature": 0}
    status, body = post_chat(hf_url, {**base, "logprob_token_ids": [5, 9, 5, 300]})
    assert status == 200
    first = body["choices"][0]["logprobs"]["content"][0]  # type: ignore[index]
    listed = first["top_logprobs"]
    assert 4 <= len(listed) <= 5  # the ids asked (once each), led by the sampled token if not among them
    for bad in ([-1], "5", [1.5], [True]):
        status, body = post_chat(hf_url, {**base, "logprob_token_ids": bad})
        assert status == 400 and "logprob_token_ids" in str(body)
    status, body = post_chat(hf_url, {**base, "logprob_token_ids": [10**9]})
    assert status == 400


def test_openai_engine_records_unsupported_servers(scripted_server: str) -> None:
    """The scripted engine has no exact log-probs: the server refuses the ids with a 400, the
    engine notes the server as unsupported once and answers the protocol's scores alone."""

    async def go() -> list[object]:
        eng = OpenAIEngine([scripted_server], "scripted:judge", timeout_s=30, letter_token_ids=(1, 2, 3))
        try:
            return list(await eng.score([ScoreRequest("q", "Question: which?")]))
        finally:
            await eng.aclose()

    (res,) = asyncio.run(go())
    assert isinstance(res, LetterScores) and res.exact == [] and res.exact_source == "unsupported"


def test_screen_through_serve_records_lp_exact(tiny_model: Path, hf_url: str, tmp_path: Path) -> None:
    """``benchcheck screen --engine openai --letter-tokenizer`` rows carry the in-process lp_exact."""
    import subprocess
    import sys

    from benchcheck.store import read_rows

    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"item_id": f"S_{i}", "bench": "S", "question": f"q {i}?",
                                         "options": [f"o{j}" for j in range(4)], "answer": i % 4}) + "\n"
                             for i in range(4)))
    exe = str(Path(sys.executable).with_name("benchcheck"))
    p = subprocess.run([exe, "screen", "--items", str(items), "--step", "4", "--chain", "4", "--results",
                        str(tmp_path / "r"), "--engine", "openai", "--endpoint", hf_url, "--model", "tiny-vl",
                        "--letter-tokenizer", str(tiny_model), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = list(read_rows(tmp_path / "r" / "step4" / "S.jsonl"))
    assert len(rows) == 4 and all(r["lp_exact_source"] == "logprob_token_ids" for r in rows)
    local = HFEngine(tiny_model, device="cpu", dtype="float32")
    from benchcheck.protocol import build_prompt_options_only
    from benchcheck.screen.steps import INTROS, STEPS

    intro = INTROS["lmms-v1"].for_step(STEPS[4])
    for r in sorted(rows, key=lambda r: r["item_id"]):
        i = int(r["item_id"].split("_")[1])
        (m,) = local.score_sync([ScoreRequest("x", build_prompt_options_only(intro, [f"o{j}" for j in range(4)]))])
        assert isinstance(m, LetterScores)
        assert r["lp_exact"] == pytest.approx(letter_logprobs(m.exact, 4)[0], abs=1e-4), i
