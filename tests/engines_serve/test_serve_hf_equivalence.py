"""Served and in-process scores agree: the ``openai`` engine against ``benchcheck serve`` (hf
engine on the tiny Qwen3-VL checkpoint) gives the letters' log-probs of ``HFEngine`` in process,
text-only and with 1 and 32 images; a too-long prompt is a context-too-long failure."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from PIL import Image
from serve_fixtures import cli_server

from benchcheck.engines.base import Failure, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.openai.client import OpenAIEngine
from benchcheck.protocol import LETTERS, LP_FLOOR, build_prompt, letter_logprobs
from benchcheck.testing import build_tiny_model

INTRO = "Look at the frames and answer."


def _frame(i: int, w: int = 448, h: int = 256) -> bytes:
    im = Image.effect_mandelbrot((w, h), (-2.0 + 0.05 * i, -1.0, 1.0, 1.0), 40).convert("RGB")
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return buf.getvalue()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


@pytest.fixture(scope="module")
def hf_server(tiny: Path) -> Iterator[str]:
    with cli_server("--model", str(tiny), "--served-model-name", "tiny-vl", "--device", "cpu") as (url, _):
        yield url


def _requests() -> list[ScoreRequest]:
    frames = tuple(_frame(i) for i in range(32))
    opts = ["a red ball", "the dog runs", "nothing happens", "a car stops"]
    return [
        ScoreRequest("text", build_prompt(INTRO, "What happens first?", opts)),
        ScoreRequest("text2", build_prompt(INTRO, "Which colour is the door?", ["red", "blue", "green"])),
        ScoreRequest("one", build_prompt(INTRO, "What is shown?", opts), frames[16:17]),
        ScoreRequest("odd", build_prompt(INTRO, "What is shown?", opts[:2]), (_frame(3, 300, 170),)),
        ScoreRequest("many", build_prompt(INTRO, "What does the video show?", opts), frames),
    ]


def test_served_scores_equal_in_process_scores(tiny: Path, hf_server: str) -> None:
    reqs = _requests()

    async def both() -> tuple[list[LetterScores | Failure], list[LetterScores | Failure]]:
        served = OpenAIEngine([hf_server], "tiny-vl", timeout_s=300)
        local = HFEngine(tiny, device="cpu")
        try:
            return await served.score(reqs), await local.score(reqs)
        finally:
            await served.aclose()
            await local.aclose()

    served, local = asyncio.run(both())
    for s, loc in zip(served, local, strict=True):
        assert isinstance(s, LetterScores), s
        assert isinstance(loc, LetterScores), loc
        assert s.prompt_tokens == loc.prompt_tokens
        assert s.top1_token == loc.top1_token and s.model == "tiny-vl"
        lp_s, _, _ = letter_logprobs(s.top, len(LETTERS))
        lp_l, _, _ = letter_logprobs(loc.top, len(LETTERS))
        assert lp_s == pytest.approx(lp_l, abs=1e-3)
        assert [e["token"] for e in s.top] == [e["token"] for e in loc.top]
    # The planted letter prior puts letters in the top 20, so the comparison is not of floors.
    assert any(max(letter_logprobs(s.top, 4)[0]) > LP_FLOOR for s in served if isinstance(s, LetterScores))
    assert served[-1].prompt_tokens - served[0].prompt_tokens > 32 * 112  # type: ignore[union-attr]


def test_too_long_prompt_is_context_too_long(hf_server: str) -> None:
    async def go() -> list[LetterScores | Failure]:
        engine = OpenAIEngine([hf_server], "tiny-vl")
        try:
            return await engine.score([ScoreRequest("long", "word " * 70000)])
        finally:
            await engine.aclose()

    [res] = asyncio.run(go())
    assert isinstance(res, Failure) and res.kind == "context_too_long" and res.status == 400
    assert "maximum context length is 65536" in res.message


def test_official_client_against_the_tiny_model(hf_server: str) -> None:
    client = openai.OpenAI(base_url=hf_server + "/v1", api_key="none", max_retries=0)
    r = client.chat.completions.create(
        model="tiny-vl",
        messages=[{"role": "user", "content": [{"type": "text", "text": build_prompt(INTRO, "Q?", ["x", "y"])}]},
                  {"role": "assistant", "content": "Answer:"}],
        max_tokens=1, temperature=0, logprobs=True, top_logprobs=20,
        extra_body={"continue_final_message": True, "add_generation_prompt": False},
    )
    assert r.choices[0].logprobs is not None and r.choices[0].logprobs.content is not None
    assert len(r.choices[0].logprobs.content[0].top_logprobs) == 20
    assert r.usage is not None and r.usage.prompt_tokens > 10
    g = client.chat.completions.create(model="tiny-vl", messages=[{"role": "user", "content": "Hello"}], max_tokens=5)
    assert g.usage is not None and 1 <= g.usage.completion_tokens <= 5
    assert isinstance(g.choices[0].message.content, str)


def test_server_counts_prompts_as_the_hf_engine_does(tiny: Path) -> None:
    """The rest of the context a request without max_tokens may use is computed from the engine's
    own prompt length (text, system message and images)."""
    from benchcheck.engines.base import GenerateRequest, Generation
    from benchcheck.serve.app import count_prompt_tokens, fill_default_max_tokens

    engine = HFEngine(tiny, device="cpu")
    reqs = [GenerateRequest("t", "Hello there", max_tokens=1, system="Be brief."),
            GenerateRequest("i", "What is shown?", (_frame(1),), max_tokens=1)]

    async def go() -> tuple[list[Generation | Failure], list[GenerateRequest]]:
        try:
            return (await engine.generate(reqs), [await fill_default_max_tokens(engine, r) for r in reqs])
        finally:
            await engine.aclose()

    gens, filled = asyncio.run(go())
    for req, gen, full in zip(reqs, gens, filled, strict=True):
        assert isinstance(gen, Generation)
        assert count_prompt_tokens(engine, req) == gen.prompt_tokens
        assert full.max_tokens == 65536 - gen.prompt_tokens
