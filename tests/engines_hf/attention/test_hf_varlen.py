"""The one-row variable-length tree attention (hf_varlen): its plan, its reference kernel against a
dense tree mask, and the engine's shared scoring through it (with the CUDA fused attention forward
too) equal to unshared scoring, with no mask or packed-sequence probe built by transformers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hf_helpers import compare, step1_requests

from benchcheck.engines.hf.attention.varlen import NAME, build_plan, flash_available
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.kernels.varlen import reference_varlen


def test_plan_cuts_the_row_into_prefix_and_suffix_sequences() -> None:
    # A family: prefix 3 + suffixes 2, 1 at 0; a lone prompt of 4 tokens (prefix 2 + suffix 2) at 6.
    plan = build_plan([(0, 3, (2, 1)), (6, 2, (2,))], torch.device("cpu"))
    assert plan.cu_q.dtype == torch.int32 and plan.cu_k.dtype == torch.int32
    assert plan.cu_q.tolist() == [0, 3, 5, 6, 10]
    assert plan.cu_k.tolist() == [0, 3, 8, 12, 16]
    assert plan.kv_index is not None
    assert plan.kv_index.tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 2, 5, 6, 7, 8, 9]
    assert (plan.max_q, plan.max_k) == (4, 5)
    assert np.array_equal(plan.host_cu_k, plan.cu_k.numpy())
    lone = build_plan([(0, 0, (1,))], torch.device("cpu"))  # a one-token prompt: no prefix sequence
    assert lone.cu_q.tolist() == [0, 1] and lone.cu_k.tolist() == [0, 1] and lone.kv_index is None


def test_a_row_of_lone_prompts_is_one_sequence_each_with_keys_in_place() -> None:
    """Prompts that share nothing (as ``lone_families`` puts them: all but the last token as the
    "prefix"): one causal sequence each, no second sequence for the scored token, nothing gathered."""
    plan = build_plan([(0, 4, (1,)), (5, 2, (1,)), (8, 6, (1,))], torch.device("cpu"))
    assert plan.cu_q.tolist() == plan.cu_k.tolist() == [0, 5, 8, 15]
    assert plan.kv_index is None and (plan.max_q, plan.max_k) == (7, 7)


def tree_mask(starts: list[tuple[int, int, tuple[int, ...]]], total: int) -> torch.Tensor:
    """The dense (total x total) tree mask of the same row, built independently."""
    seg = torch.full((total,), -1)
    fam = torch.full((total,), -1)
    for f, (start, prefix, suffixes) in enumerate(starts):
        fam[start : start + prefix + sum(suffixes)] = f
        seg[start : start + prefix] = 0
        at = start + prefix
        for j, s in enumerate(suffixes, start=1):
            seg[at : at + s] = j
            at += s
    same_fam = fam[:, None] == fam[None, :]
    sees = (seg[:, None] == seg[None, :]) | (seg[None, :] == 0)
    return same_fam & sees & torch.ones(total, total, dtype=torch.bool).tril()


def test_reference_kernel_equals_dense_tree_mask_with_grouped_heads() -> None:
    g = torch.Generator().manual_seed(0)
    fams = [(0, 5, (3, 4, 1)), (13, 4, (2, 2))]
    total = 21
    q = torch.randn(total, 4, 8, generator=g)
    k = torch.randn(total, 2, 8, generator=g)  # 2 K/V heads, each shared by 2 query heads
    v = torch.randn(total, 2, 8, generator=g)
    plan = build_plan(fams, torch.device("cpu"))
    out = reference_varlen(q, k[plan.kv_index], v[plan.kv_index], plan, 0.3)
    kk, vv = k.repeat_interleave(2, 1).transpose(0, 1), v.repeat_interleave(2, 1).transpose(0, 1)
    dense = F.scaled_dot_product_attention(q.transpose(0, 1), kk, vv, attn_mask=tree_mask(fams, total), scale=0.3)
    assert torch.allclose(out, dense.transpose(0, 1), atol=1e-6)


@pytest.fixture()
def varlen_engine(hf_engine: HFEngine) -> HFEngine:
    size, tree = hf_engine.max_batch_size, hf_engine.tree_attention
    hf_engine.max_batch_size = 16
    hf_engine.tree_attention = "varlen"
    yield hf_engine  # type: ignore[misc]
    hf_engine.max_batch_size, hf_engine.tree_attention = size, tree
    hf_engine.share_prefixes = True


def test_transformers_builds_no_mask_and_no_packed_probe(varlen_engine: HFEngine,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import masking_utils

    from benchcheck.engines.hf.attention import varlen as hf_varlen

    calls: list[bool] = []
    real = hf_varlen.tree_attention

    def spy(*a: object, varlen_plan: object = None, **k: object) -> object:
        calls.append(varlen_plan is not None)
        return real(*a, varlen_plan=varlen_plan, **k)  # type: ignore[arg-type]

    def probe(*a: object, **k: object) -> None:
        raise AssertionError("packed-sequence probe (a device read and a T x T mask)")

    masks: list[object] = []

    def mask_spy(**k: object) -> object:
        masks.append(masking_utils.sdpa_mask(**k))  # type: ignore[arg-type]
        return masks[-1]

    monkeypatch.setattr(masking_utils, "find_packed_sequence_indices", probe)
    monkeypatch.setitem(masking_utils.AttentionMaskInterface._global_mapping, NAME, mask_spy)
    from transformers.modeling_utils import AttentionInterface

    monkeypatch.setitem(AttentionInterface._global_mapping, NAME, spy)
    assert varlen_engine.model.config.text_config._attn_implementation == NAME
    res = varlen_engine.score_sync(step1_requests()[:8])
    assert all(r.prompt_tokens > 0 for r in res)  # type: ignore[union-attr]
    layers = varlen_engine.model.config.text_config.num_hidden_layers
    # Every layer of every packed forward (the engine ramps its first batches) through the plan,
    # but the last: that one attends at the scored positions only (hf_scored).
    assert varlen_engine.scored_last_layer
    assert calls and all(calls) and len(calls) == (layers - 1) * len(masks)
    assert set(masks) == {None}  # SDPA's mask function, once a forward, built nothing (causal, no padding)


def test_fused_attention_forward_takes_the_plan_too(tiny_model: Path) -> None:
    """On CUDA the engine runs its own text attention forward (hf_fused); the plan reaches the
    attention function through it as well (here uncompiled, on the CPU)."""
    from benchcheck.engines.hf.model.fused import use_fused_text_attention

    engine = HFEngine(tiny_model, device="cpu", max_batch_size=16)
    assert use_fused_text_attention(engine.model, compiler=lambda f: f) > 0
    engine.tree_attention = "varlen"
    assert compare(engine, step1_requests()) < 1e-4


def test_flash_only_on_cuda_16_bit() -> None:
    assert not flash_available(torch.device("cpu"), torch.bfloat16)
    assert not flash_available(torch.device("cpu"), torch.float32)


def test_unpadded_scoring_packs_requests_that_share_nothing_in_one_row(varlen_engine: HFEngine,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``unpadded_scoring`` (on by default): one-frame-like requests (each its own image, nothing
    shared) scored in the one row, without padding, equal to the right-padded batch; with the knob
    off, or for prompts longer than ``UNPADDED_MAX_TOKENS``, no row is packed."""
    from hf_helpers import make_jpeg

    from benchcheck.engines.base import LetterScores, ScoreRequest
    from benchcheck.engines.hf import engine as hf

    packed: list[int] = []
    real = hf.pack

    def spy(*a: object, **k: object) -> object:
        packed.append(len(a[1]))  # type: ignore[arg-type]
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(hf, "pack", spy)
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: what is shown?" + " more" * (3 * i) + "\nOptions:\nA. x\nB. y",
                         images=(make_jpeg(i),)) for i in range(5)]
    assert varlen_engine.unpadded_scoring
    varlen_engine.unpadded_scoring = False
    try:
        padded = varlen_engine.score_sync(reqs)
    finally:
        varlen_engine.unpadded_scoring = True
    assert packed == []
    unpadded = varlen_engine.score_sync(reqs)
    assert sum(packed) == len(reqs)  # every request in a packed row, a family of its own
    for a, b in zip(padded, unpadded, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert [e["token"] for e in a.top[:5]] == [e["token"] for e in b.top[:5]]
        assert max(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.top, b.top, strict=True)) < 1e-4
    packed.clear()
    monkeypatch.setattr(hf, "UNPADDED_MAX_TOKENS", min(r.prompt_tokens for r in unpadded) - 1)  # type: ignore[union-attr]
    assert all(isinstance(r, LetterScores) for r in varlen_engine.score_sync(reqs))
    assert packed == []  # longer prompts: right-padded rows
