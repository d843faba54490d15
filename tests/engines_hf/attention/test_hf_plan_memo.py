"""Op ``new_shape_flash``: a small attention shape met first in a generation prefill runs with
SDPA's cuDNN kernel off (no plan built), and with it on once the shape recurs (decision 111)."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.base import GenerateRequest
from benchcheck.engines.hf.attention.sdpa import PlanMemo
from benchcheck.engines.hf.engine import HFEngine


def cudnn_in(memo: PlanMemo, q: torch.Tensor, k: torch.Tensor, causal: bool = True) -> bool:
    """Whether SDPA's cuDNN kernel is allowed inside the memo's block for this call."""
    with memo.kernels(q, k, k, causal):
        return bool(torch.backends.cuda.cudnn_sdp_enabled())  # type: ignore[no-untyped-call]


def qk(b: int, h: int, lq: int, lk: int, d: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty(b, h, lq, d), torch.empty(b, max(1, h // 4), lk, d)


def test_a_small_new_shape_runs_without_a_plan_until_it_recurs() -> None:
    # 2 x 32 heads x 300^2 x 128 causal: 1.5 GFLOPs, under a 700-GFLOP limit; 1 x 32 x 30,000^2 x
    # 128 causal is 7.4 TFLOPs, over it.
    memo = PlanMemo(700e9)
    small, big = qk(2, 32, 300, 300), qk(1, 32, 30_000, 30_000)
    memo.forward()
    assert [cudnn_in(memo, *small) for _ in range(3)] == [False] * 3  # every layer of the forward alike
    assert cudnn_in(memo, *big)  # too large: its plan is worth building at once
    assert torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]  # restored after each block
    memo.forward()
    assert cudnn_in(memo, *small) and cudnn_in(memo, *big)  # met again: it recurs, so its plan is built
    memo.forward()
    assert cudnn_in(memo, *small)  # planned: cuDNN from then on
    # Another length, another shape; the same numbers in other strides, another shape too.
    assert not cudnn_in(memo, *qk(2, 32, 301, 301))
    q, k = small
    assert not cudnn_in(memo, q.transpose(1, 2).contiguous().transpose(1, 2), k)
    # Non-causal (the vision tower): the full square counts.
    vision = PlanMemo(4.0 * 8 * 16 * 196 * 196 * 72)
    vision.forward()
    assert not cudnn_in(vision, *qk(8, 16, 196, 196, 72), causal=False)
    assert cudnn_in(vision, *qk(9, 16, 196, 196, 72), causal=False)
    # Three-dimensional queries are not the memo's: SDPA's own choice.
    assert cudnn_in(memo, torch.empty(32, 300, 128), torch.empty(8, 300, 128))


def test_the_memo_forgets_the_oldest_small_shapes_beyond_its_bound() -> None:
    memo = PlanMemo(700e9, remember=3)
    memo.forward()
    for n in range(5):
        assert not cudnn_in(memo, *qk(1, 32, 100 + n, 100 + n))
    assert len(memo.met) == 3
    memo.forward()
    assert not cudnn_in(memo, *qk(1, 32, 100, 100))  # forgotten: met as new again
    assert cudnn_in(memo, *qk(1, 32, 104, 104))  # remembered: recurs, planned


def test_each_thread_meets_a_shape_for_itself() -> None:
    # PyTorch keeps cuDNN's plans per thread: a shape recurring on one thread is new on another,
    # which runs it once without a plan, then plans it when it recurs there.
    memo = PlanMemo(700e9)
    small = qk(2, 32, 300, 300)
    memo.forward()
    assert not cudnn_in(memo, *small)
    memo.forward()
    assert cudnn_in(memo, *small)
    with ThreadPoolExecutor(1) as other:  # one other thread, alive throughout
        assert other.submit(lambda: [cudnn_in(memo, *small), cudnn_in(memo, *small)]).result() == [False, False]
        memo.forward()
        assert other.submit(cudnn_in, memo, *small).result()  # recurs there: planned there
    assert cudnn_in(memo, *small)  # the first thread's, met long ago


@pytest.fixture
def scored_calls() -> list[tuple[tuple[int, ...], bool]]:
    return []


@pytest.fixture()
def sdpa_calls(monkeypatch: pytest.MonkeyPatch,
               scored_calls: list[tuple[tuple[int, ...], bool]]) -> list[tuple[tuple[int, ...], bool]]:
    """Every SDPA call's query shape and whether cuDNN was allowed there (the library's function,
    wrapped; transformers and the vision tower call it through ``torch.nn.functional``), but the
    scored last layer's calls with one query a row (``model.scored``), which go to ``scored_calls``."""
    seen: list[tuple[tuple[int, ...], bool]] = []
    real = torch.nn.functional.scaled_dot_product_attention
    from benchcheck.engines.hf.model import scored

    def spy(q: torch.Tensor, *a: Any, **kw: Any) -> torch.Tensor:
        call = (tuple(q.shape), bool(torch.backends.cuda.cudnn_sdp_enabled()))  # type: ignore[no-untyped-call]
        (scored_calls if sys._getframe(1).f_code.co_filename == scored.__file__ else seen).append(call)
        return real(q, *a, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    return seen


def test_the_engines_prefill_runs_new_small_shapes_without_plans_and_generates_the_same(
        tiny_model: Path, sdpa_calls: list[tuple[tuple[int, ...], bool]],
        scored_calls: list[tuple[tuple[int, ...], bool]]) -> None:
    # Two requests of unequal length with an image each: a right-padded prefill through the vision
    # tower and the language model. Op on: the first call's attention (vision and prefill) with
    # cuDNN off; the same call again, its shapes recur, cuDNN allowed. Op off: allowed throughout.
    # Decode steps are the planless op's (cuDNN off either way). The texts are the same.
    base = HFEngine(tiny_model, device="cpu")
    base = base.with_config(base.config.with_ops("-new_shape_flash"))  # on by default (decision 116)
    base.stop_ids = set()
    on = base.with_config(base.config.with_ops("+new_shape_flash"))
    on.stop_ids = set()
    reqs = [GenerateRequest(f"g{i}", "What is shown here?" + " Look closely." * i, (make_jpeg(i, 64, 64),),
                            max_tokens=3) for i in range(2)]
    vision_heads = base.model.config.vision_config.num_heads

    def prefill(calls: list[tuple[tuple[int, ...], bool]]) -> list[tuple[tuple[int, ...], bool]]:
        return [c for c in calls if c[0][2] > 1]  # decode steps attend with one query

    first = on.generate_sync(reqs)
    first_calls = prefill(sdpa_calls)
    sdpa_calls.clear()
    again = on.generate_sync(reqs)
    again_calls = prefill(sdpa_calls)
    sdpa_calls.clear()
    plain = base.generate_sync(reqs)
    plain_calls = prefill(sdpa_calls)
    layers = base.model.config.text_config.num_hidden_layers
    depth = base.model.config.vision_config.depth
    assert sum(1 for c in first_calls if c[0][1] == vision_heads) >= depth  # the tower's calls are in
    assert len(first_calls) == len(again_calls) == len(plain_calls) >= layers - 1 + depth
    # The scored last layer's single queries (a new key length at almost every prefill) never on cuDNN.
    assert len(scored_calls) == 3 and not any(allowed for _, allowed in scored_calls)
    assert not any(allowed for _, allowed in first_calls)
    assert all(allowed for _, allowed in again_calls) and all(allowed for _, allowed in plain_calls)
    assert torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    texts = [[g.text for g in out] for out in (first, again, plain)]  # type: ignore[union-attr]
    assert texts[0] == texts[1] == texts[2]


@pytest.mark.parametrize("case", ["left-padded", "equal rows"])
def test_the_other_prefills_carry_the_memo_too(tiny_model: Path, case: str,
                                               sdpa_calls: list[tuple[tuple[int, ...], bool]]) -> None:
    # A left-padded prefill (op right_prefill off: transformers' masked path through the whole
    # model's forward) and a batch of rows of one length (no padding): new shapes without cuDNN
    # first, with it when they recur.
    base = HFEngine(tiny_model, device="cpu")
    base = base.with_config(base.config.with_ops("-new_shape_flash"))
    ops = ("+new_shape_flash", "-right_prefill") if case == "left-padded" else ("+new_shape_flash",)
    on = base.with_config(base.config.with_ops(*ops))
    on.stop_ids = set()
    words = [0, 3] if case == "left-padded" else [2, 2]
    reqs = [GenerateRequest(f"o{i}", "Name it." + " Now." * n, (make_jpeg(7 + i, 64, 64),), max_tokens=2)
            for i, n in enumerate(words)]
    on.generate_sync(reqs)
    first = [c for c in sdpa_calls if c[0][2] > 1]
    sdpa_calls.clear()
    on.generate_sync(reqs)
    again = [c for c in sdpa_calls if c[0][2] > 1]
    assert first and len(first) == len(again)
    assert not any(allowed for _, allowed in first) and all(allowed for _, allowed in again)


def test_the_op_is_on_by_default_and_its_limit_is_a_knob() -> None:
    from benchcheck.engines.hf.config import HFConfig

    cfg = HFConfig()
    assert cfg.op("new_shape_flash") and cfg.new_shape_flash_gflops == 700  # timed: decision 116
    assert HFConfig.parse(["new_shape_flash_gflops=50", "ops=+new_shape_flash"]).new_shape_flash_gflops == 50
    with pytest.raises(ValueError, match="new_shape_flash_gflops"):
        HFConfig(new_shape_flash_gflops=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuDNN's attention needs a GPU")
def test_on_cuda_a_new_small_prefill_runs_no_cudnn_attention_until_it_recurs(tiny_model: Path) -> None:
    # bf16 on CUDA, where SDPA ranks cuDNN first: with the op on, the first call's prefill and
    # vision tower launch no cuDNN attention (FlashAttention instead); the same call again does
    # wherever the op off does (its shapes recur, so their plans are worth building).
    from torch.profiler import ProfilerActivity, profile

    base = HFEngine(tiny_model, device="cuda", dtype="bfloat16")
    base = base.with_config(base.config.with_ops("-new_shape_flash"))
    base.stop_ids = set()
    on = base.with_config(base.config.with_ops("+new_shape_flash"))
    on.stop_ids = set()
    reqs = [GenerateRequest(f"c{i}", "Describe it." + " Slowly." * (3 * i + 1), (make_jpeg(i, 96, 64),),
                            max_tokens=2) for i in range(2)]

    def kernels(engine: HFEngine) -> dict[str, int]:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            engine.generate_sync(reqs)
        names = [e.key for e in prof.key_averages()]
        counts = {e.key: e.count for e in prof.key_averages()}
        return {k: counts[k] for k in ("aten::_cudnn_attention_forward", "aten::_flash_attention_forward",
                                       "aten::_efficient_attention_forward") if k in names}

    first, again, plain = kernels(on), kernels(on), kernels(base)
    assert "aten::_cudnn_attention_forward" not in first, first
    assert first.get("aten::_flash_attention_forward", 0) + first.get("aten::_efficient_attention_forward", 0) > 0
    if "aten::_cudnn_attention_forward" in plain:
        assert again.get("aten::_cudnn_attention_forward", 0) > 0, again
    assert torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]


def test_with_one_launching_thread_a_shape_recurs_whichever_thread_calls(
        tiny_model: Path, sdpa_calls: list[tuple[tuple[int, ...], bool]]) -> None:
    # The ready ops together (new_shape_flash, launch_thread, visual_no_reads). The memo keeps
    # shapes per thread because PyTorch keeps cuDNN's plans per
    # thread; with the launching thread, every call's attention runs on that one thread, so the
    # same call from another caller finds its shapes met and cuDNN allowed. Without it, the other
    # caller meets them as new. The texts are the same every way.
    base = HFEngine(tiny_model, device="cpu")
    base = base.with_config(base.config.with_ops("-new_shape_flash"))
    base.stop_ids = set()
    flash = base.with_config(base.config.with_ops("+new_shape_flash"))
    both = base.with_config(base.config.with_ops("+new_shape_flash", "+launch_thread", "+visual_no_reads"))
    flash.stop_ids = both.stop_ids = set()
    reqs = [GenerateRequest(f"t{i}", "Which one moves?" + " Watch." * (2 * i + 5), (make_jpeg(20 + i, 64, 48),),
                            max_tokens=2) for i in range(2)]

    def prefill_allowed(engine: HFEngine, caller: ThreadPoolExecutor) -> tuple[list[bool], list[str]]:
        sdpa_calls.clear()
        out = caller.submit(engine.generate_sync, reqs).result()
        return [allowed for shape, allowed in sdpa_calls if shape[2] > 1], [g.text for g in out]  # type: ignore[union-attr]

    plain = [g.text for g in base.generate_sync(reqs)]  # type: ignore[union-attr]
    try:
        with ThreadPoolExecutor(1) as one, ThreadPoolExecutor(1) as two:
            first, texts1 = prefill_allowed(both, one)
            second, texts2 = prefill_allowed(both, two)
            own_first, texts3 = prefill_allowed(flash, one)
            own_second, texts4 = prefill_allowed(flash, two)
    finally:
        asyncio.run(both.aclose())
    assert first and not any(first)  # new on the launching thread
    assert len(second) == len(first) and all(second)  # met there before, though another thread calls
    assert len(own_first) == len(own_second) == len(first)
    assert not any(own_first) and not any(own_second)  # per caller: new on each
    assert texts1 == texts2 == texts3 == texts4 == plain
