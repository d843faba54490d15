"""Op ``qkv_packed``: a fixed-shape decode step's q, k and v projections as one product over one
packed weight, the three projections' weights being its views (decision 131)."""

from __future__ import annotations

import copy
import gc
import weakref
from pathlib import Path

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import Batch, collate
from benchcheck.engines.hf.forward.generate import DecodeGraphs, greedy_batch
from benchcheck.engines.hf.model import fused as hf_fused
from benchcheck.engines.hf.model.state import ModelState, state_of

PROMPTS = [("Describe the scene.", ()), ("Say something" + " longer" * 9, ()), ("What is shown?", (make_jpeg(3),))]


def attentions(engine: HFEngine) -> list[torch.nn.Module]:
    return [m for m in engine.model.modules() if type(m).__name__ == hf_fused.ATTENTION_CLASS]


def fused_engine(tiny_model: Path) -> tuple[HFEngine, Batch, ModelState]:
    """The tiny engine with the fused attention forward installed (q, k, v packed), a batch of
    three prompts (one with an image) and the model's state."""
    engine = HFEngine(tiny_model, device="cpu")
    prompts = [engine.encoder.encode(text, images, None) for text, images in PROMPTS]
    batch = collate(prompts, engine.pad_id, engine.pixels, engine.dtype)
    hf_fused.use_fused_text_attention(engine.model, compiler=lambda f: f)
    return engine, batch, state_of(engine.model)


def test_the_packed_weight_holds_the_three_weights_and_they_are_its_views(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu")
    before = {id(a): [getattr(a, n).weight.detach().clone() for n in hf_fused.QKV] for a in attentions(engine)}
    params = sum(p.numel() for p in engine.model.parameters())
    hf_fused.use_fused_text_attention(engine.model, compiler=lambda f: f)
    state = state_of(engine.model)
    assert state.qkv == set(attentions(engine)) and state.qkv
    for attn in attentions(engine):
        packed = hf_fused.packed_qkv(attn, state)
        assert packed is not None
        assert torch.equal(packed, torch.cat(before[id(attn)]))  # the values, copied exactly
        assert not packed.requires_grad  # a product over it records no graph, whatever the mode
        start = 0
        for name in hf_fused.QKV:
            w = getattr(attn, name).weight
            assert isinstance(w, torch.nn.Parameter)
            assert w.data_ptr() == packed[start:].data_ptr()  # a view: no weight stored twice
            start += w.shape[0]
    assert sum(p.numel() for p in engine.model.parameters()) == params


def test_decode_steps_take_one_product_and_generate_as_three_do(tiny_model: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    engine, batch, state = fused_engine(tiny_model)
    q_rows, packed_rows = attentions(engine)[0].q_proj.out_features, packed_shape(attentions(engine)[0])[0]
    starts = {a.q_proj.weight.data_ptr() for a in attentions(engine)}  # the q weight's and the packed one's
    products: list[int] = []  # the rows of each product over those (a hook would stop the packing)
    linear = torch.nn.functional.linear

    def counted(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if weight.data_ptr() in starts:
            products.append(weight.shape[0])
        return linear(x, weight, bias)

    monkeypatch.setattr(torch.nn.functional, "linear", counted)
    logits: list[torch.Tensor] = []
    hook = engine.model.lm_head.register_forward_hook(lambda m, a, out: logits.append(out[:, -1].clone()))
    chosen = state.config
    try:
        state.config = chosen.with_ops("-qkv_packed")
        three = greedy_batch(engine.model, batch, [5, 5, 5], set(), engine.pad_id,
                             graphs=DecodeGraphs(fixed_steps=True))
        calls_three = products.count(q_rows)
        packed_three = products.count(packed_rows)
        state.config = chosen.with_ops("+qkv_packed")
        one = greedy_batch(engine.model, batch, [5, 5, 5], set(), engine.pad_id, graphs=DecodeGraphs(fixed_steps=True))
    finally:
        state.config = chosen
        hook.remove()
    layers = len(attentions(engine))
    assert calls_three == 5 * layers and packed_three == 0  # the prefill and 4 steps, every layer
    assert products.count(q_rows) - calls_three == layers  # packed: the prefill only
    assert products.count(packed_rows) == 4 * layers  # and one product a step
    assert one == three
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(logits[:5], logits[5:], strict=True))


@pytest.mark.parametrize("where", ["projection", "every module"])
def test_a_forward_hook_sees_every_projection_call(tiny_model: Path, where: str) -> None:
    """A hook on a projection (or on every module) would be skipped by the packed product: while
    one is registered the steps take the three products, and the packing stays for after it."""
    engine, batch, state = fused_engine(tiny_model)
    calls: list[int] = []

    def seen(m: torch.nn.Module, i: object, o: object) -> None:
        if m is attentions(engine)[0].v_proj:
            calls.append(1)

    if where == "projection":
        handle = attentions(engine)[0].v_proj.register_forward_hook(seen)
    else:
        handle = torch.nn.modules.module.register_module_forward_hook(seen)
    try:
        greedy_batch(engine.model, batch, [5, 5, 5], set(), engine.pad_id, graphs=DecodeGraphs(fixed_steps=True))
    finally:
        handle.remove()
    assert len(calls) == 5  # the prefill and every step
    assert state.qkv == set(attentions(engine))
    assert all(hf_fused.packed_qkv(a, state) is not None for a in attentions(engine))


def test_a_replaced_weight_falls_back_to_three_products_and_frees_the_packed_copy(tiny_model: Path) -> None:
    engine, batch, state = fused_engine(tiny_model)
    first = attentions(engine)[0]
    fixed = DecodeGraphs(fixed_steps=True)
    reference = greedy_batch(engine.model, batch, [4, 4, 4], set(), engine.pad_id, graphs=fixed)
    # A load or cast that gives the projection a tensor of its own (here, the same values).
    first.k_proj.weight = torch.nn.Parameter(first.k_proj.weight.detach().clone())
    assert hf_fused.packed_qkv(first, state) is None
    assert first not in state.qkv  # dropped: its memory back
    assert all(hf_fused.packed_qkv(a, state) is not None for a in attentions(engine)[1:])
    again = greedy_batch(engine.model, batch, [4, 4, 4], set(), engine.pad_id, graphs=DecodeGraphs(fixed_steps=True))
    assert again == reference


def test_projections_that_are_not_plain_linear_layers_are_left_as_they_are(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu")
    attn = attentions(engine)[0]
    attn.v_proj = torch.nn.Sequential(attn.v_proj)  # e.g. a quantized or adapted layer
    pointers = [attn.q_proj.weight.data_ptr(), attn.k_proj.weight.data_ptr()]
    assert hf_fused.pack_qkv(attn) is None
    assert [attn.q_proj.weight.data_ptr(), attn.k_proj.weight.data_ptr()] == pointers


class Adapted(torch.nn.Module):
    """An adapter over a projection (as LoRA's layers are): the base layer's weight exposed as its
    own, a low-rank correction added to its output."""

    def __init__(self, base: torch.nn.Linear) -> None:
        super().__init__()
        self.base = base
        self.weight = base.weight
        self.out_features = base.out_features
        self.delta = torch.nn.Linear(base.in_features, base.out_features, bias=False)
        torch.nn.init.normal_(self.delta.weight, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.delta(x)  # type: ignore[no-any-return]


@pytest.mark.parametrize("change", ["adapter", "bias", "wrapper", "forward"])
def test_a_projection_changed_after_packing_decodes_as_its_forward_does(tiny_model: Path, change: str) -> None:
    """A projection given a bias or wrapped after the weights were packed: its weight may still be
    the packed rows, but the packed product would skip what the module adds (or find no weight)."""
    engine, batch, state = fused_engine(tiny_model)
    torch.manual_seed(0)
    for attn in attentions(engine):
        if change == "bias":
            attn.v_proj.bias = torch.nn.Parameter(torch.randn(attn.v_proj.out_features))
        elif change == "forward":  # a forward set on the instance (as some patching libraries do)
            proj = attn.v_proj
            proj.forward = lambda x, proj=proj: torch.nn.Linear.forward(proj, x) * 2
        else:
            attn.v_proj = Adapted(attn.v_proj) if change == "adapter" else torch.nn.Sequential(attn.v_proj)
    logits: list[torch.Tensor] = []
    hook = engine.model.lm_head.register_forward_hook(lambda m, a, out: logits.append(out[:, -1].clone()))
    chosen = state.config
    try:
        for ops in ("-qkv_packed", "+qkv_packed"):
            state.config = chosen.with_ops(ops)
            greedy_batch(engine.model, batch, [4, 4, 4], set(), engine.pad_id, graphs=DecodeGraphs(fixed_steps=True))
    finally:
        state.config = chosen
        hook.remove()
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(logits[:4], logits[4:], strict=True))
    assert not state.qkv  # forgotten: the three products from now on


def packed_shape(attn: torch.nn.Module) -> tuple[int, int]:
    return sum(getattr(attn, n).weight.shape[0] for n in hf_fused.QKV), attn.q_proj.weight.shape[1]


def alive(shape: tuple[int, int]) -> int:
    """Tensors alive of ``shape``."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor) and tuple(o.shape) == shape)


def test_a_cast_or_a_deep_copy_keeps_no_second_copy_of_the_packed_weights(tiny_model: Path) -> None:
    """A cast or move gives each projection a tensor of its own: the packed memory goes with the old
    weights at once, not at a later decode step with the op on (a scoring-only run or an engine
    with the op off takes none). A deep copy's projections are copies of their own, nothing more."""
    engine, batch, state = fused_engine(tiny_model)
    shape = packed_shape(attentions(engine)[0])
    before = alive(shape)
    copied = copy.deepcopy(engine.model)
    assert alive(shape) == before + sum(tuple(p.shape) == shape for p in copied.parameters())  # its weights alone
    del copied
    storages = [weakref.ref(a.q_proj.weight.untyped_storage()) for a in attentions(engine)]
    engine.model.to(torch.bfloat16)
    gc.collect()
    assert all(s() is None for s in storages)  # the float32 weights' memory back
    assert all(hf_fused.packed_qkv(a, state) is None for a in attentions(engine))
    chosen = state.config
    try:
        runs = []
        for ops in ("-qkv_packed", "+qkv_packed"):
            state.config = chosen.with_ops(ops)
            runs.append(greedy_batch(engine.model, batch, [4, 4, 4], set(), engine.pad_id,
                                     graphs=DecodeGraphs(fixed_steps=True)))
    finally:
        state.config = chosen
    assert runs[0] == runs[1]
