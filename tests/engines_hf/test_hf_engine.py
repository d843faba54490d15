"""The hf engine end to end on the tiny model: scoring, batching, generation, failures, loading."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import torch
from hf_helpers import make_jpeg, variant

from benchcheck.engines import Engine, Failure, GenerateRequest, Generation, LetterScores, ScoreRequest, create_engine
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.protocol import LP_FLOOR, letter_logprobs

OPTIONS = "Options:\nA. red\nB. blue\nC. green\nD. black\nAnswer with the option letter only."


def prompt(i: int) -> str:
    return f"Intro.\n\nQuestion: {'what is shown here ' * (1 + i % 5)}?\n{OPTIONS}"


def mixed_requests() -> list[ScoreRequest]:
    """Different lengths and image counts, so batches need padding and image packing."""
    return [ScoreRequest(f"r{i}", prompt(i), tuple(make_jpeg(10 * i + k) for k in range(i % 3))) for i in range(9)]


def scores(res: list[LetterScores | Failure]) -> list[LetterScores]:
    out = []
    for r in res:
        assert isinstance(r, LetterScores), r
        out.append(r)
    return out


def test_batched_scores_equal_one_at_a_time(hf_engine: HFEngine) -> None:
    reqs = mixed_requests()
    batched = scores(hf_engine.score_sync(reqs))
    assert [r.request_id for r in batched] == [r.request_id for r in reqs]
    for req, b in zip(reqs, batched, strict=True):
        [single] = scores(hf_engine.score_sync([req]))
        assert b.prompt_tokens == single.prompt_tokens
        assert [e["token"] for e in b.top[:5]] == [e["token"] for e in single.top[:5]]
        lb, _, _ = letter_logprobs(b.top, 4)
        ls, _, _ = letter_logprobs(single.top, 4)
        assert max(abs(x - y) for x, y in zip(lb, ls, strict=True)) < 1e-4
        assert len(b.top) == 20 and b.top1_token == b.top[0]["token"]
        assert all(isinstance(e["logprob"], float) and e["logprob"] <= 0 for e in b.top)


def test_images_change_the_scores_and_32_images_fit(hf_engine: HFEngine) -> None:
    text = ScoreRequest("t", prompt(1))
    one = ScoreRequest("one", prompt(1), (make_jpeg(5),))
    many = ScoreRequest("many", prompt(1), tuple(make_jpeg(100 + k) for k in range(32)))
    rt, r1, r32 = scores(hf_engine.score_sync([text, one, many]))
    assert r1.prompt_tokens == rt.prompt_tokens + 112 + 2  # vision start/end around 112 pads
    assert r32.prompt_tokens == rt.prompt_tokens + 32 * 114
    assert letter_logprobs(rt.top, 4)[0] != letter_logprobs(r1.top, 4)[0]
    assert letter_logprobs(r1.top, 4)[0] != letter_logprobs(r32.top, 4)[0]


def test_images_as_paths_equal_images_as_bytes(hf_engine: HFEngine, tmp_path: Path) -> None:
    data = make_jpeg(9)
    path = tmp_path / "frame_16.jpg"
    path.write_bytes(data)
    a, b = scores(hf_engine.score_sync([ScoreRequest("b", "q", (data,)), ScoreRequest("p", "q", (path,))]))
    assert a.top == b.top


def test_failures_stay_with_their_request(hf_engine: HFEngine) -> None:
    long_prompt = "word " * 70_000  # over the 65,536-token context
    reqs = [
        ScoreRequest("ok1", prompt(0)),
        ScoreRequest("bad-image", prompt(0), (b"not a jpeg",)),
        ScoreRequest("too-long", long_prompt),
        ScoreRequest("ok2", prompt(2)),
    ]
    ok1, bad, long, ok2 = hf_engine.score_sync(reqs)
    assert isinstance(ok1, LetterScores) and isinstance(ok2, LetterScores)
    assert isinstance(bad, Failure) and bad.kind == "bad_request" and "image 0" in bad.message
    assert isinstance(long, Failure) and long.kind == "context_too_long"
    assert "maximum context length" in long.message and long.status == 400


def test_greedy_generation(hf_engine: HFEngine) -> None:
    reqs = [
        GenerateRequest("g1", "Describe the scene.", max_tokens=12),
        GenerateRequest("g2", prompt(3), images=(make_jpeg(1),), max_tokens=5),
        GenerateRequest("g3", "Hi", max_tokens=3, system="Be brief."),
    ]
    batched = hf_engine.generate_sync(reqs)
    for req, g in zip(reqs, batched, strict=True):
        assert isinstance(g, Generation), g
        assert g.text and 0 < g.completion_tokens <= req.max_tokens
        [alone] = hf_engine.generate_sync([req])
        assert isinstance(alone, Generation) and alone.text == g.text


def test_rows_of_unequal_length_are_padded_on_the_right_and_generate_the_same(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchcheck.engines.hf.engine as engine_module

    reqs = [GenerateRequest("g1", "Describe the scene.", max_tokens=6),
            GenerateRequest("g2", prompt(3), images=(make_jpeg(1),), max_tokens=4),
            GenerateRequest("g3", "Describe the scene.", images=(make_jpeg(2),), max_tokens=5)]
    sides: list[bool] = []
    real = engine_module.upload
    monkeypatch.setattr(engine_module, "upload",
                        lambda host, *a, **kw: (sides.append(host.right), real(host, *a, **kw))[1])
    right = hf_engine.generate_sync(reqs)
    assert True in sides  # a batch of several rows (the planner may send the first alone)
    sides.clear()
    left = variant(hf_engine, "-right_prefill").generate_sync(reqs)  # type: ignore[attr-defined]
    assert True not in sides
    assert [g.text for g in right] == [g.text for g in left]  # type: ignore[union-attr]
    assert all(isinstance(g, Generation) for g in right)
    hf_engine.generate_sync(reqs[:1])  # one row: nothing to pad, left as it was
    assert sides[-1] is False


def test_rows_too_long_for_one_prefill_are_prefilled_apart_and_decoded_together(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchcheck.engines.hf.engine as engine_module

    reqs = [GenerateRequest(f"g{i}", prompt(i + 2), images=(make_jpeg(i),), max_tokens=4 + i) for i in range(4)]
    lengths = [hf_engine.count_tokens(r) for r in reqs]
    small = max(lengths) + 1  # each prompt fits a forward, no two do
    assert 2 * min(lengths) > small
    rows: list[list[int]] = []  # each batch's rows, by the prefill they are in
    real = engine_module.greedy_start

    def spy(model: object, batch: object, *a: object, **kw: object) -> object:
        rows.append([len(b.lengths) for b in batch] if isinstance(batch, list) else [len(batch.lengths)])  # type: ignore[attr-defined]
        return real(model, batch, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_module, "greedy_start", spy)
    together = variant(hf_engine, max_batch_tokens=small, first_chunk=4).generate_sync(reqs)  # type: ignore[attr-defined]
    assert rows == [[1, 1, 1, 1]]  # one batch: four prefills, one decode loop
    rows.clear()
    apart = variant(hf_engine, "-decode_together", max_batch_tokens=small,  # type: ignore[attr-defined]
                    first_chunk=4).generate_sync(reqs)
    assert rows == [[1]] * 4
    assert all(isinstance(g, Generation) for g in together)
    assert [g.text for g in together] == [g.text for g in apart]  # type: ignore[union-attr]


def test_a_generation_batch_reserves_no_more_slots_than_its_budget(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row of a generation batch reserves its longest prompt plus its most new tokens: with
    those maxima in different rows the planner still keeps the reservation within
    ``decode_batch_tokens`` (counting each row's own prompt plus new tokens, it planned these two
    together and reserved 768 slots against a budget of 600)."""
    import benchcheck.engines.hf.forward.generate as generate_module

    long = GenerateRequest("long", " ".join(["word"] * 64), max_tokens=2)
    short = GenerateRequest("short", "Say something.", max_tokens=150)
    n_long, n_short = hf_engine.count_tokens(long), hf_engine.count_tokens(short)
    assert 180 < n_long < 240 and n_short < 40, (n_long, n_short)
    budget = 600
    made: list[int] = []  # each batch's slots: rows x capacity
    real_cache = generate_module.ReservedCache
    real_start = generate_module.greedy_start

    def start(model: object, batch: object, max_new: list[int], *a: object, **kw: object) -> object:
        made.append(len(max_new))
        return real_start(model, batch, max_new, *a, **kw)  # type: ignore[arg-type]

    def cache(layers: int, capacity: int) -> object:
        made[-1] *= capacity
        return real_cache(layers, capacity)

    import benchcheck.engines.hf.engine as engine_module

    monkeypatch.setattr(engine_module, "greedy_start", start)
    monkeypatch.setattr(generate_module, "ReservedCache", cache)
    engine = variant(hf_engine, max_batch_tokens=300, decode_batch_tokens=budget, first_chunk=2)
    out = engine.generate_sync([long, short])  # type: ignore[attr-defined]
    assert made and all(slots <= budget for slots in made), made
    assert len(made) == 2  # planned apart
    alone = [hf_engine.generate_sync([r])[0] for r in (long, short)]
    assert [g.text for g in out] == [g.text for g in alone]  # type: ignore[union-attr]


def test_generation_continues_the_prefill_like_scoring(hf_engine: HFEngine) -> None:
    [g] = hf_engine.generate_sync([GenerateRequest("g", prompt(4), max_tokens=1, assistant_prefix="Answer:")])
    [s] = scores(hf_engine.score_sync([ScoreRequest("s", prompt(4))]))
    assert isinstance(g, Generation) and g.text == s.top1_token


def test_generation_with_cache_equals_full_recomputation(hf_engine: HFEngine) -> None:
    req = GenerateRequest("g", "Tell me what happens.", max_tokens=6)
    [g] = hf_engine.generate_sync([req])
    assert isinstance(g, Generation)
    ids = hf_engine.encoder.encode(req.prompt).input_ids.tolist()
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(req.max_tokens):
            logits = hf_engine.model(input_ids=torch.tensor([ids + new])).logits[0, -1]
            tok = int(logits.argmax())
            if tok in hf_engine.stop_ids:
                break
            new.append(tok)
    assert g.text == hf_engine.tokenizer.decode(new, skip_special_tokens=True)


def test_engine_protocol_registry_and_event_loop(tiny_model: Path) -> None:
    engine = create_engine("hf", model=tiny_model, device="cpu", served_name="tiny")
    assert isinstance(engine, Engine) and engine.model_name == "tiny"

    async def main() -> tuple[list[LetterScores | Failure], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        task = asyncio.create_task(ticker())
        res = await engine.score([ScoreRequest("a", prompt(1), tuple(make_jpeg(k) for k in range(16)))])
        task.cancel()
        await engine.aclose()
        return res, ticks

    res, ticks = asyncio.run(main())
    assert isinstance(res[0], LetterScores) and res[0].model == "tiny"
    assert ticks > 3  # the loop kept running while the model worked


def test_hub_name_at_a_pinned_revision(tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub repo id resolves through the hub cache at the pinned commit (offline, laid out
    exactly as huggingface_hub stores downloads)."""
    import huggingface_hub.constants as hub

    commit = "0c351dd01ed87e9c1b53cbc748cba10e6187ff3b"
    repo = tmp_path / "hub" / "models--benchcheck--tiny-qwen3-vl"
    shutil.copytree(tiny_model, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    engine = HFEngine("benchcheck/tiny-qwen3-vl", revision=commit, device="cpu")
    assert engine.revision == commit and engine.model_name == "benchcheck/tiny-qwen3-vl"
    local = HFEngine(tiny_model, device="cpu")
    req = [ScoreRequest("a", prompt(2))]
    assert scores(engine.score_sync(req))[0].top == scores(local.score_sync(req))[0].top
    with pytest.raises(Exception, match=r"(?i)revision|not found|cannot find|offline"):
        HFEngine("benchcheck/tiny-qwen3-vl", revision="f" * 40, device="cpu")


@pytest.mark.gpu
def test_cuda_bfloat16_batched_close_to_single(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cuda", max_batch_size=8)
    assert engine.dtype == torch.bfloat16
    reqs = mixed_requests()
    batched = scores(engine.score_sync(reqs))
    cpu = scores(HFEngine(tiny_model, device="cpu").score_sync(reqs))
    for req, b, c in zip(reqs, batched, cpu, strict=True):
        [single] = scores(engine.score_sync([req]))
        lb, ls, lc = (letter_logprobs(x.top, 4)[0] for x in (b, single, c))
        # Letters in the top 20 of both (a letter at the edge may drop out under bf16 rounding).
        assert max(abs(x - y) for x, y in zip(lb, ls, strict=True) if min(x, y) > LP_FLOOR) < 0.1
        assert max(abs(x - y) for x, y in zip(lb, lc, strict=True) if min(x, y) > LP_FLOOR) < 0.2


def test_collector_frozen_once_after_the_first_call(tiny_model: Path) -> None:
    """``freeze_collector`` (on for CUDA): what is alive after the engine's first call leaves the
    collector's scans (``gc.freeze``); later calls freeze nothing more, so garbage made after it is
    collected as usual."""
    import gc

    assert HFEngine(tiny_model, device="cpu", max_batch_size=4).freeze_collector is False  # the CPU: as is
    engine = HFEngine(tiny_model, device="cpu", max_batch_size=4, config=HFConfig(ops=("+freeze_gc",)))
    assert engine.freeze_collector is True
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        first = scores(engine.score_sync([ScoreRequest("a", prompt(0))]))
        frozen = gc.get_freeze_count()
        assert frozen > 0
        later = [[k] for k in range(1000)]  # tracked containers made after the freeze
        again = scores(engine.score_sync([ScoreRequest("a", prompt(0))]))
        # Frozen objects freed since (by reference counting) leave the count; nothing joins it.
        assert gc.get_freeze_count() <= frozen and len(later) == 1000
        assert first[0].top == again[0].top
    finally:
        gc.unfreeze()
