"""Greedy generation (``hf_generate``): the reserved KV cache, the decode attention, the loop."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.base import Failure, GenerateRequest
from benchcheck.engines.hf.attention.cache import KEY_BLOCK, ReservedCache, ReservedLayer
from benchcheck.engines.hf.attention.decode import decode_attention
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import Batch, collate, position_ids
from benchcheck.engines.hf.forward.generate import DecodeGraphs, DecodeStep, greedy_batch, greedy_start
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.inputs.rope import mrope_positions
from benchcheck.engines.hf.model.state import state_of

PROMPTS = [("Describe the scene.", ()), ("Say something" + " longer" * 9, ()), ("What is shown?", (make_jpeg(3),))]


def encoded(engine: HFEngine) -> list[EncodedPrompt]:
    return [engine.encoder.encode(text, images, None) for text, images in PROMPTS]


def recomputed(engine: HFEngine, prompt: EncodedPrompt, n: int, stop: set[int]) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens of one request alone, the whole sequence recomputed each step (no cache),
    and the last position's logits of each step."""
    new: list[int] = []
    logits: list[torch.Tensor] = []
    with torch.inference_mode():
        for _ in range(n):
            types = np.concatenate([prompt.mm_token_type_ids, np.zeros(len(new), np.int64)])
            p = dataclasses.replace(
                prompt,
                input_ids=np.concatenate([prompt.input_ids, np.asarray(new, np.int64)]),
                mm_token_type_ids=types,
                mrope=None if prompt.mrope is None else mrope_positions(types, prompt.image_grid_thw,
                                                                        engine.encoder.merge),
            )
            batch = collate([p], engine.pad_id, engine.pixels, engine.dtype)
            out = engine.model(**batch.model_kwargs(engine.model), position_ids=position_ids(batch))
            logits.append(out.logits[0, -1])
            tok = int(out.logits[0, -1].argmax())
            if tok in stop:
                break
            new.append(tok)
    return new, logits


def generate(engine: HFEngine, prompts: list[EncodedPrompt], max_new: list[int], stop: set[int],
             lookback: int | None = None, right: bool = False, apart: list[int] | None = None,
             scored_only: bool = False) -> list[list[int]]:
    """``apart``: the rows of each batch prefilled apart (padded on the right), in order."""
    if apart:
        cuts = np.cumsum([0, *apart])
        parts = [collate(prompts[a:b], engine.pad_id, engine.pixels, engine.dtype, right=True)
                 for a, b in itertools.pairwise(cuts)]
        return greedy_batch(engine.model, parts, max_new, stop, engine.pad_id, lookback=lookback,
                            scored_only=scored_only)
    batch = collate(prompts, engine.pad_id, engine.pixels, engine.dtype, right=right)
    return greedy_batch(engine.model, batch, max_new, stop, engine.pad_id, lookback=lookback, scored_only=scored_only)


@pytest.mark.parametrize("which,max_new,fixed_shapes,right,apart,scored_only", [
    # rows of different lengths: left padding, masked steps over the reservation
    ([0, 1, 2], [7, 3, 5], True, False, None, False),
    ([0, 1, 2], [7, 3, 5], True, True, None, False),  # the same padded on the right: a causal prefill, no mask
    ([0, 1], [5, 3], True, True, None, False),  # text alone on the right: M-RoPE goes on from each row's own end
    ([2], [6], False, False, None, False),  # no padding: the cache appends, no mask
    # prefilled apart (one row, then two), decoded together: masked steps over one reservation
    ([0, 1, 2], [7, 3, 5], True, True, [1, 2], False),
    ([2, 0, 2], [4, 6, 2], True, True, [1, 1, 1], False),  # each row alone, the longest first
    # the prefill's last decoder layer at each row's last real token alone (model.scored)
    ([0, 1, 2], [7, 3, 5], True, True, None, True),
    ([0, 1, 2], [7, 3, 5], True, True, [1, 2], True),
    ([2], [6], False, False, None, True),  # no padding: as a right-padded batch
])
def test_a_batch_decodes_as_each_request_alone(hf_engine: HFEngine, which: list[int], max_new: list[int],
                                               fixed_shapes: bool, right: bool, apart: list[int] | None,
                                               scored_only: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    prompts = [encoded(hf_engine)[i] for i in which]
    assert (len({p.n_tokens for p in prompts}) > 1) == fixed_shapes
    steps: list[torch.Tensor] = []  # the logits of the prefill and of every decode step
    starts: list[int] = []
    real = ReservedCache.start_decoding
    monkeypatch.setattr(ReservedCache, "start_decoding", lambda c, slot: (starts.append(1), real(c, slot))[1])
    last = hf_engine.model.model.language_model.layers[-1]
    shapes: list[tuple[int, int]] = []  # the last layer's output (rows, positions), prefills first
    layer_hook = last.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape[:2])))
    hook = hf_engine.model.lm_head.register_forward_hook(lambda m, a, out: steps.append(out[:, -1].clone()))
    try:
        out = generate(hf_engine, prompts, max_new, set(), right=right, apart=apart, scored_only=scored_only)
    finally:
        hook.remove()
        layer_hook.remove()
    assert bool(starts) == fixed_shapes
    parts = apart or [len(prompts)]
    if scored_only:  # each prefill's last layer ran at its rows' last real tokens alone: (1, rows)
        assert shapes[: len(parts)] == [(1, n) for n in parts], shapes
    else:
        assert all(w > 1 for _, w in shapes[: len(parts)]), shapes
    # The prefill's logits come one batch at a time, then every decode step's.
    assert [len(t) for t in out] == max_new and len(steps) == max(max_new) + len(apart or [1]) - 1
    if apart:
        steps = [torch.cat(steps[: len(apart)]), *steps[len(apart):]]
    for r, (p, n) in enumerate(zip(prompts, max_new, strict=True)):
        tokens, logits = recomputed(hf_engine, p, n, set())
        assert out[r] == tokens
        # The logits too (the tiny model's tokens repeat, so they alone would miss a wrong mask or position).
        for s, want in enumerate(logits):
            assert torch.allclose(steps[s][r], want, atol=1e-4), (r, s, (steps[s][r] - want).abs().max())


def test_a_stop_token_ends_its_row_and_the_others_go_on(hf_engine: HFEngine) -> None:
    prompts = encoded(hf_engine)
    free = generate(hf_engine, prompts, [6, 6, 6], set())
    stop = {free[0][2]}  # row 0's third token
    out = generate(hf_engine, prompts, [6, 6, 6], stop)
    assert out[0] == free[0][:2]
    for row, full in zip(out[1:], free[1:], strict=True):
        end = next((i for i, t in enumerate(full) if t in stop), len(full))
        assert row == full[:end]
    assert out == [recomputed(hf_engine, p, 6, stop)[0] for p in prompts]


def test_the_loop_ends_once_every_row_has_stopped(hf_engine: HFEngine) -> None:
    prompts = encoded(hf_engine)[:2]
    calls: list[int] = []
    hook = hf_engine.model.model.language_model.register_forward_pre_hook(lambda m, a: calls.append(1))
    try:
        everything = set(range(int(hf_engine.model.config.text_config.vocab_size)))
        assert generate(hf_engine, prompts, [50, 50], everything) == [[], []]
        assert len(calls) == 1  # the prefill only: both rows stopped at their first token
        calls.clear()
        assert [len(t) for t in generate(hf_engine, prompts, [0, 4], set())] == [0, 4]
        assert len(calls) == 4  # the prefill and 3 steps: the 4th token is never fed back
    finally:
        hook.remove()


def test_finished_flags_read_late_end_the_loop_late_and_change_no_token(hf_engine: HFEngine) -> None:
    """The flags of "every row finished" read ``lookback`` steps late (as on CUDA): the loop runs
    at most that many steps more, and every row's tokens are the same."""
    prompts = encoded(hf_engine)
    free = generate(hf_engine, prompts, [9, 9, 9], set())
    stop = {free[0][1], free[2][3]}  # rows end at different steps
    calls: list[int] = []
    hook = hf_engine.model.model.language_model.register_forward_pre_hook(lambda m, a: calls.append(1))
    try:
        at_once = generate(hf_engine, prompts, [9, 9, 9], stop, lookback=0)
        n_at_once = len(calls)
        calls.clear()
        late = generate(hf_engine, prompts, [9, 9, 9], stop, lookback=3)
        assert late == at_once
        assert n_at_once < 9 and len(calls) == min(9, n_at_once + 3)
        calls.clear()
        everything = set(range(int(hf_engine.model.config.text_config.vocab_size)))
        assert generate(hf_engine, prompts, [50, 50, 50], everything, lookback=4) == [[], [], []]
        assert len(calls) == 1 + 4  # the prefill, then 4 steps until the first flag is read
    finally:
        hook.remove()


def test_generation_needs_sdpa_attention(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu")
    engine.model.config.text_config._attn_implementation = "eager"  # would add the bool mask, not apply it
    [g] = engine.generate_sync([GenerateRequest("g", "Describe.", max_tokens=3)])
    assert isinstance(g, Failure) and g.request_id == "g"
    assert "generation needs the model's text attention to be SDPA, not 'eager'" in g.message


def test_the_reserved_layer_appends_in_place_and_writes_decode_steps_at_their_slot() -> None:
    layer = ReservedLayer(capacity=6)
    k1, v1 = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    keys, values = layer.update(k1[:, :, :3], v1[:, :, :3])
    assert keys is not None and torch.equal(keys, k1[:, :, :3]) and torch.equal(values, v1[:, :, :3])
    keys, values = layer.update(k1[:, :, 3:], v1[:, :, 3:])  # appended in place: a view of the reservation
    assert keys.shape == (2, 3, 4, 8) and torch.equal(keys, k1) and torch.equal(values, v1)
    assert layer.keys is not None and keys.data_ptr() == layer.keys.data_ptr()
    assert layer.get_seq_length() == 4 and layer.get_mask_sizes(1) == (5, 0)
    layer.slot = torch.tensor([4])
    k2, v2 = torch.randn(2, 3, 1, 8), torch.randn(2, 3, 1, 8)
    keys, values = layer.update(k2, v2)
    assert keys.shape == (2, 3, 6, 8)  # the whole reservation
    assert torch.equal(keys[:, :, :4], k1) and torch.equal(keys[:, :, 4:5], k2) and not keys[:, :, 5].any()
    layer.slot = None
    with pytest.raises(ValueError, match="6 tokens cannot take 7"):
        layer.update(torch.randn(2, 3, 3, 8), torch.randn(2, 3, 3, 8))


def test_the_reserved_cache_serves_the_model_like_a_dynamic_cache(hf_engine: HFEngine) -> None:
    from transformers.cache_utils import DynamicCache

    prompts = encoded(hf_engine)
    batch = collate(prompts, hf_engine.pad_id, hf_engine.pixels, hf_engine.dtype)
    pos = position_ids(batch)
    layers = hf_engine.model.config.text_config.num_hidden_layers
    outs = []
    with torch.inference_mode():
        for cache in (DynamicCache(config=hf_engine.model.config), ReservedCache(layers, batch.input_ids.shape[1] + 3)):
            outs.append(hf_engine.model(**batch.model_kwargs(hf_engine.model), position_ids=pos, use_cache=True,
                                        past_key_values=cache).logits)
    assert torch.allclose(outs[0], outs[1], atol=1e-5)


def repeated_kv_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                          scale: float) -> torch.Tensor:
    """Attention as transformers' SDPA path computes it with a mask: keys repeated per query head."""
    from transformers.integrations.sdpa_attention import repeat_kv

    g = q.shape[1] // k.shape[1]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out = sdpa(q, repeat_kv(k, g), repeat_kv(v, g), attn_mask=mask, scale=scale)
    return out.transpose(1, 2)


@pytest.mark.parametrize("heads,kv_heads", [(8, 2), (4, 4)])
def test_decode_attention_equals_attention_with_repeated_keys(heads: int, kv_heads: int) -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(3, heads, 1, 16), torch.randn(3, kv_heads, 11, 16), torch.randn(3, kv_heads, 11, 16)
    mask = torch.rand(3, 1, 1, 11) > 0.3
    mask[:, :, :, 0] = True
    ours = decode_attention(q, k, v, mask, 0.25)
    assert ours.shape == (3, 1, heads, 16)
    assert torch.allclose(ours, repeated_kv_attention(q, k, v, mask, 0.25), atol=1e-6)
    # A masked slot's contents do not matter.
    k2 = k.clone()
    k2[~mask[:, 0, 0, :][:, None, :].expand(-1, kv_heads, -1)] = 1e4
    assert torch.allclose(decode_attention(q, k2, v, mask, 0.25), ours, atol=1e-6)


def test_decode_attention_over_many_key_blocks_equals_attention_with_repeated_keys() -> None:
    # A reservation of whole key blocks, as fixed-shape steps have: the values are reduced in
    # KEY_BLOCK pieces whose partial sums are added.
    torch.manual_seed(1)
    s = 3 * KEY_BLOCK
    q, k, v = torch.randn(2, 8, 1, 16), torch.randn(2, 2, s, 16), torch.randn(2, 2, s, 16)
    mask = torch.zeros(2, 1, 1, s, dtype=torch.bool)
    mask[0, :, :, : s - 5] = True
    mask[1, :, :, 40:200] = True  # left padding, and slots not yet written
    ours = decode_attention(q, k, v, mask, 0.25)
    assert torch.allclose(ours, repeated_kv_attention(q, k, v, mask, 0.25), atol=1e-5)
    # 16-bit caches: probabilities rounded to the cache's dtype, scores and sums in float32.
    half = decode_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, 0.25)
    assert half.dtype == torch.bfloat16
    assert (half.float() - ours).abs().max() < 0.03


def test_fixed_shape_steps_decode_as_appending_ones(tiny_model: Path) -> None:
    # One request (no padding) longer than a key block: eagerly it appends and attends with no
    # mask; with fixed steps (what a graph replays), through the fused attention forward, it
    # attends over a reservation of whole key blocks with decode_attention, masked.
    from benchcheck.engines.hf.model import fused as hf_fused

    engine = HFEngine(tiny_model, device="cpu")
    prompt = engine.encoder.encode("Say something" + " longer" * (KEY_BLOCK + 20), (), None)
    assert prompt.n_tokens > KEY_BLOCK
    batch = collate([prompt], engine.pad_id, engine.pixels, engine.dtype)
    logits: list[torch.Tensor] = []
    hook = engine.model.lm_head.register_forward_hook(lambda m, a, out: logits.append(out[:, -1].clone()))
    try:
        appended = greedy_batch(engine.model, batch, [7], set(), engine.pad_id)
        hf_fused.use_fused_text_attention(engine.model, compiler=lambda f: f)
        fixed = greedy_batch(engine.model, batch, [7], set(), engine.pad_id, graphs=DecodeGraphs(fixed_steps=True))
    finally:
        hook.remove()
    assert fixed == appended == generate(engine, [prompt], [7], set())
    assert len(logits) == 14
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(logits[:7], logits[7:], strict=True))


def test_fused_attention_generates_through_decode_attention(tiny_model: Path) -> None:
    from benchcheck.engines.hf.model import fused as hf_fused

    engine = HFEngine(tiny_model, device="cpu")
    prompts = encoded(engine)
    logits: list[torch.Tensor] = []
    hook = engine.model.lm_head.register_forward_hook(lambda m, a, out: logits.append(out[:, -1].clone()))
    seen: list[int] = []
    real = hf_fused.decode_attention

    def counting(*args: Any, **kwargs: Any) -> torch.Tensor:
        seen.append(1)
        return real(*args, **kwargs)

    try:
        before = generate(engine, prompts, [5, 5, 5], set())
        hf_fused.decode_attention = counting  # type: ignore[assignment]
        hf_fused.use_fused_text_attention(engine.model, compiler=lambda f: f)
        assert generate(engine, prompts, [5, 5, 5], set()) == before
    finally:
        hf_fused.decode_attention = real  # type: ignore[assignment]
        hook.remove()
    assert len(seen) == 4 * engine.model.config.text_config.num_hidden_layers  # 4 steps, every layer
    assert len(logits) == 10
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(logits[:5], logits[5:], strict=True))


def test_op_decode_split_reaches_decode_attention_and_falls_back_off_cuda(tiny_model: Path) -> None:
    from benchcheck.engines.hf.model import fused as hf_fused
    from benchcheck.engines.hf.model.state import state_of

    engine = HFEngine(tiny_model, device="cpu")
    prompts = encoded(engine)
    hf_fused.use_fused_text_attention(engine.model, compiler=lambda f: f)
    real = hf_fused.decode_attention
    splits: list[bool] = []

    def counting(*args: Any, **kwargs: Any) -> torch.Tensor:
        splits.append(bool(args[5]) if len(args) > 5 else bool(kwargs.get("split")))
        return real(*args, **kwargs)

    state = state_of(engine.model)
    chosen = state.config
    try:
        hf_fused.decode_attention = counting  # type: ignore[assignment]
        state.config = chosen.with_ops("-decode_split")
        before = generate(engine, prompts, [4, 4, 4], set())
        state.config = chosen.with_ops("+decode_split")
        assert generate(engine, prompts, [4, 4, 4], set()) == before  # the products ran: no kernel on the CPU
    finally:
        hf_fused.decode_attention = real  # type: ignore[assignment]
        state.config = chosen
    layers = engine.model.config.text_config.num_hidden_layers
    assert splits == [False] * 3 * layers + [True] * 3 * layers


def test_decode_graphs_stay_off_the_cpu(hf_engine: HFEngine) -> None:
    graphs = DecodeGraphs(enabled=True)
    prompts = encoded(hf_engine)
    batch = collate(prompts, hf_engine.pad_id, hf_engine.pixels, hf_engine.dtype)
    assert greedy_batch(hf_engine.model, batch, [4, 4, 4], set(), hf_engine.pad_id, graphs=graphs) == \
        generate(hf_engine, prompts, [4, 4, 4], set())
    assert (graphs.enabled, graphs.captured, graphs.failed) == (True, 0, 0)  # nothing tried off CUDA


def test_a_failed_capture_turns_graphs_off_once(caplog: pytest.LogCaptureFixture) -> None:
    graphs = DecodeGraphs(enabled=True)
    graphs.failure("")
    graphs.failure("again")
    assert (graphs.enabled, graphs.failed) == (False, 2)
    assert [r.getMessage() for r in caplog.records if "eagerly" in r.getMessage()] == [
        "decode steps run eagerly from now on: capturing one as a CUDA graph failed ()"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graph_replay_decodes_as_the_eager_steps(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cuda", dtype="float32")
    prompts = encoded(engine)
    batch = collate(prompts, engine.pad_id, engine.pixels, engine.dtype)
    eager = greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, pacer=engine.pacer)
    graphs = DecodeGraphs(enabled=True)
    graphed = greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, graphs=graphs, pacer=engine.pacer)
    assert (graphs.captured, graphs.failed) == (1, 0)  # really replayed, not eager again
    assert graphed == eager
    # Too few steps to be worth a capture: eager steps, the same tokens.
    short = greedy_batch(engine.model, batch, [3, 2, 1], set(), engine.pad_id, graphs=graphs, pacer=engine.pacer)
    assert graphs.captured == 1
    assert short == greedy_batch(engine.model, batch, [3, 2, 1], set(), engine.pad_id, pacer=engine.pacer)


def graph_step_flags(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The model state's ``graph_step`` at each decode step's forward, recorded from now on."""
    flags: list[bool] = []
    real = DecodeStep._forward

    def seen(self: DecodeStep) -> torch.Tensor:
        flags.append(state_of(self.model).graph_step)
        return real(self)

    monkeypatch.setattr(DecodeStep, "_forward", seen)
    return flags


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_a_steps_warm_up_and_capture_run_as_graph_steps_and_eager_steps_do_not(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Op graph_fused: the model state's graph_step is set for the warm-up and the capture alone
    # (the compiled small-row paths, model.fused.plain), and the replayed tokens are the eager ones.
    engine, batch, eager = eager_on_cuda(tiny_model)
    flags = graph_step_flags(monkeypatch)
    graphs = DecodeGraphs(enabled=True)
    assert greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, graphs=graphs,
                        pacer=engine.pacer) == eager
    assert flags == [True, True] and graphs.captured == 1  # the warm-up and the capture; replays run no Python
    assert not state_of(engine.model).graph_step
    flags.clear()
    assert greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, pacer=engine.pacer) == eager
    assert flags == [False] * 8


def eager_on_cuda(tiny_model: Path) -> tuple[HFEngine, Batch, list[list[int]]]:
    """A float32 engine on CUDA, the three prompts' batch, and its tokens (9, 4, 6 new) from eager steps."""
    engine = HFEngine(tiny_model, device="cuda", dtype="float32")
    batch = collate(encoded(engine), engine.pad_id, engine.pixels, engine.dtype)
    return engine, batch, greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, pacer=engine.pacer)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graph_capture_neither_drains_the_device_nor_empties_the_caches(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.cuda.graph's set-up waits for the device and empties the allocator's caches; the
    # capture here does neither, so its host time overlaps the prefill still running. The second
    # batch's graph shares the first one's memory pool, and both decode as the eager steps do.
    engine, batch, eager = eager_on_cuda(tiny_model)
    calls: list[str] = []

    def counted(name: str) -> Any:
        real = getattr(torch.cuda, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)
        return call

    for name in ("synchronize", "empty_cache"):
        monkeypatch.setattr(torch.cuda, name, counted(name))
    monkeypatch.setattr(torch._C, "_host_emptyCache", lambda: calls.append("_host_emptyCache"), raising=False)
    graphs = DecodeGraphs(enabled=True)
    out, reserved = [], []
    for _ in range(3):
        out.append(greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, graphs=graphs,
                                pacer=engine.pacer))
        reserved.append(torch.cuda.memory_reserved())
    assert (graphs.captured, graphs.failed) == (3, 0)
    assert calls == []
    assert out == [eager] * 3
    # One stream and one pool: the third batch's capture reuses the second's blocks.
    assert reserved[2] == reserved[1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_warm_once_captures_a_known_row_count_without_its_warm_up(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Op decode_warm_once: the first batch of 3 rows warms up and captures (two step forwards
    # before the replays); the next batches of 3 rows only capture (one), also over a longer
    # reservation; a batch of 2 rows warms again; every batch decodes as the eager steps do.
    engine = HFEngine(tiny_model, device="cuda", dtype="float32")
    prompts = encoded(engine)
    three = collate(prompts, engine.pad_id, engine.pixels, engine.dtype)
    two = collate(prompts[:2], engine.pad_id, engine.pixels, engine.dtype)
    eager3 = greedy_batch(engine.model, three, [9, 4, 6], set(), engine.pad_id, pacer=engine.pacer)
    eager2 = greedy_batch(engine.model, two, [9, 4], set(), engine.pad_id, pacer=engine.pacer)
    # A longer reservation (more key blocks) of a warmed row count: captured without a warm-up too.
    longer = greedy_batch(engine.model, three, [5, 4, 130], set(), engine.pad_id, pacer=engine.pacer)
    forwards: list[bool] = []
    real = DecodeStep._forward

    def counted(self: DecodeStep) -> torch.Tensor:
        forwards.append(torch.cuda.is_current_stream_capturing())
        return real(self)

    monkeypatch.setattr(DecodeStep, "_forward", counted)
    graphs = DecodeGraphs(enabled=True, warm_once=True)
    seen = []
    for batch, max_new, eager in ((three, [9, 4, 6], eager3), (three, [9, 4, 6], eager3), (two, [9, 4], eager2),
                                  (three, [5, 4, 130], longer)):
        forwards.clear()
        # The engine's pacer (its launches' pre-hooks) is handed over, as the engine does, so
        # that the capture turns it off: its event waits may not run inside a capture.
        out = greedy_batch(engine.model, batch, max_new, set(), engine.pad_id, graphs=graphs, pacer=engine.pacer)
        seen.append(forwards.copy())
        assert out == eager
    assert (graphs.captured, graphs.failed, graphs.unwarmed_failed) == (4, 0, 0)
    assert seen == [[False, True], [True], [False, True], [True]]  # eager warm-up, then the capture
    assert graphs.warmed == {2, 3}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_a_capture_without_warm_up_that_fails_is_warmed_and_captured_again(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A step of a warmed row count whose capture still fails (something needed a first run at
    # the new shape) is warmed up and captured again: graphs stay on, the tokens are the eager ones.
    # (The failure here is raised before any CUDA call, so the capture ends cleanly; a capture
    # spoiled by an illegal call inside it is not exercised.)
    engine, batch, eager = eager_on_cuda(tiny_model)
    graphs = DecodeGraphs(enabled=True, warm_once=True, warmed={3})
    forwards: list[bool] = []
    real = DecodeStep._forward

    def first_capture_fails(self: DecodeStep) -> torch.Tensor:
        capturing = torch.cuda.is_current_stream_capturing()
        forwards.append(capturing)
        if capturing and len(forwards) == 1:
            raise RuntimeError("a first run needed")
        return real(self)

    monkeypatch.setattr(DecodeStep, "_forward", first_capture_fails)
    out = greedy_batch(engine.model, batch, [9, 4, 6], set(), engine.pad_id, graphs=graphs, pacer=engine.pacer)
    assert forwards == [True, False, True]  # the failed capture, then a warm-up and the capture
    assert (graphs.captured, graphs.failed, graphs.enabled) == (1, 0, True)
    assert out == eager
    # Each such failure drains the device: every later capture warms up.
    assert (graphs.unwarmed_failed, graphs.warm_once) == (1, False)


def test_tokens_are_read_when_asked_and_equal_the_waited_ones(tiny_model: Path) -> None:
    # greedy_start returns with the decode loop done and the tokens not yet read; reading them
    # later (after another batch was started) gives what greedy_batch gives.
    engine = HFEngine(tiny_model, device="cpu")
    prompts = encoded(engine)
    batch = collate(prompts, engine.pad_id, engine.pixels, engine.dtype)
    read = greedy_start(engine.model, batch, [5, 3, 4], set(), engine.pad_id)
    other = greedy_start(engine.model, collate(prompts[:1], engine.pad_id, engine.pixels, engine.dtype), [2],
                         set(), engine.pad_id)
    assert read() == greedy_batch(engine.model, batch, [5, 3, 4], set(), engine.pad_id)
    assert [len(t) for t in read()] == [5, 3, 4]
    assert [len(t) for t in other()] == [2]
    assert greedy_start(engine.model, batch, [0, 0, 0], set(), engine.pad_id)() == [[], [], []]


def test_a_loop_that_never_waited_reads_before_it_returns(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One step (the prefill's token) with a look-back of 1: the loop never waits for the device,
    # so greedy_start reads the tokens before it returns (a caller timing the batch at the return
    # would otherwise time its launch). With more steps the loop has waited, and the read is left
    # to the caller.
    from benchcheck.engines.hf.forward import generate as gen

    engine = HFEngine(tiny_model, device="cpu")
    batch = collate(encoded(engine)[:1], engine.pad_id, engine.pixels, engine.dtype)
    reads: list[int] = []
    real = gen._cut
    monkeypatch.setattr(gen, "_cut", lambda t, n, s: (reads.append(len(t)), real(t, n, s))[1])
    one = greedy_start(engine.model, batch, [1], set(), engine.pad_id, lookback=1)
    assert reads == [1]
    assert [len(t) for t in one()] == [1] and reads == [1]
    more = greedy_start(engine.model, batch, [5], set(), engine.pad_id, lookback=1)
    assert reads == [1]
    assert [len(t) for t in more()] == [5] and reads == [1, 1]


def test_planless_decode_steps_leave_cudnn_out_and_generate_the_same(tiny_model: Path) -> None:
    # Op decode_planless (on by default): the eager decode steps of an unpadded batch (a lone
    # request, few new tokens: no graph) run with SDPA's cuDNN kernel switched off, since it builds
    # a plan per new key length; the prefill keeps SDPA's choice and the switch is restored after
    # the call. The op off leaves the steps on SDPA's choice; the texts are the same either way.
    engine = HFEngine(tiny_model, device="cpu")
    off = engine.with_config(engine.config.with_ops("-decode_planless"))
    req = GenerateRequest("g", "Tell me what you see.", (), max_tokens=4)
    seen: list[tuple[int, bool]] = []
    layer = engine.model.model.language_model.layers[0]
    hook = layer.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append((args[0].shape[1] if args else kwargs["hidden_states"].shape[1],
                                             torch.backends.cuda.cudnn_sdp_enabled())),  # type: ignore[no-untyped-call]
        with_kwargs=True)
    assert torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    try:
        engine.stop_ids = off.stop_ids = set()  # every answer its 4 new tokens
        planless = engine.generate_sync([req])
        with_planless = list(seen)
        seen.clear()
        chosen = off.generate_sync([req])
    finally:
        hook.remove()
    assert [g.text for g in planless] == [g.text for g in chosen]  # type: ignore[union-attr]
    assert torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    prompt = with_planless[0][0]
    assert prompt > 1
    assert with_planless == [(prompt, True)] + [(1, False)] * 3  # the prefill as chosen; each step cuDNN off
    assert seen == [(prompt, True)] + [(1, True)] * 3  # the op off: SDPA's choice throughout


def test_the_checks_eager_fixed_steps_run_as_captured_steps_do(hf_engine: HFEngine,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # gpu_screen's check compares graph texts with the same steps run eagerly (fixed_steps): those
    # steps must take the captured steps' kernels (graph_step, op graph_fused), the prefill not.
    batch = collate(encoded(hf_engine), hf_engine.pad_id, hf_engine.pixels, hf_engine.dtype)
    flags = graph_step_flags(monkeypatch)
    plain = greedy_batch(hf_engine.model, batch, [5, 4, 6], set(), hf_engine.pad_id)
    assert flags and not any(flags)
    flags.clear()
    fixed = greedy_batch(hf_engine.model, batch, [5, 4, 6], set(), hf_engine.pad_id,
                         graphs=DecodeGraphs(fixed_steps=True))
    assert flags == [True] * 5 and fixed == plain
    assert not state_of(hf_engine.model).graph_step
