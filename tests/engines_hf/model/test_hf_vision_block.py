"""The fused vision block (op ``vision_block``) computes transformers' own block forward (float32,
CPU: the compile step is eager there and the activation the module's own), the engine's scores do
not move with it, its install check refuses a block without what it reads, and the op's switch."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_helpers import make_jpeg, variant

from benchcheck.engines import LetterScores, ScoreRequest
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.pixels import patchify
from benchcheck.engines.hf.model import vision_block
from benchcheck.engines.hf.model.install import fast_paths, install_fast_paths
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.transformers_lib import transformers_module

PATH = "fused_vision_blocks"


def tower(engine: Any, pixels: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode(), engine.active():
        out = engine.model.model.visual(pixels, grid_thw=grid)
    merged = torch.cat([out.pooler_output, *out.deepstack_features], dim=-1)
    return torch.cat([out.last_hidden_state.flatten(), merged.flatten()])


def frames(engine: HFEngine) -> tuple[torch.Tensor, torch.Tensor]:
    got, grid = engine.encoder.frames([make_jpeg(1), make_jpeg(2, w=256, h=448), make_jpeg(3)])
    return patchify(got, engine.pixels), torch.from_numpy(grid)


def counting_compiler(calls: dict[str, int]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A stand-in for ``torch.compile`` that runs each function eagerly and counts its calls by name."""
    def counting(f: Callable[..., Any]) -> Callable[..., Any]:
        def run(*a: Any) -> Any:
            calls[f.__name__] = calls.get(f.__name__, 0) + 1
            return f(*a)
        return run
    return counting


def test_the_fused_block_equals_transformers_block_forward(hf_engine: HFEngine) -> None:
    visual = hf_engine.model.model.visual
    assert visual.config.hidden_act == vision_block.TANH_GELU  # the tiny model's, as the real ones
    assert hf_engine.fast_paths.installed[PATH] == len(visual.blocks)
    assert not hf_engine.config.op("vision_block", cuda=False)  # default: CUDA only
    pixels, grid = frames(hf_engine)
    ours = tower(variant(hf_engine, "+vision_block"), pixels, grid)
    saved = [vars(b).pop("forward") for b in visual.blocks]  # transformers' own block forward
    try:
        ref = tower(hf_engine, pixels, grid)
    finally:
        for b, f in zip(visual.blocks, saved, strict=True):
            b.forward = f
    assert hf_engine.model.dtype == torch.float32
    assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-5), (ours - ref).abs().max()


def test_each_block_takes_its_norm1_from_the_block_before(tiny_model: Path, hf_engine: HFEngine) -> None:
    # Installed on a fresh model with a compiler that counts calls: the first block runs norm1,
    # every later one takes it from the residual add of the block before; same tower output.
    model = _fresh(tiny_model)
    calls: dict[str, int] = {}
    counting = counting_compiler(calls)
    blocks = model.model.visual.blocks
    # The random-weight norms are ones and zeros, the biases zeros: made distinct, so a parameter
    # read from the wrong module (norm1 for norm2, this block's for the next's) shows.
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for m in blocks.modules():
            if isinstance(m, (torch.nn.LayerNorm, torch.nn.Linear)):
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.5)
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + torch.randn(m.weight.shape, generator=gen) * 0.5)
    assert vision_block.use_fused_vision_blocks(model, compiler=counting) == len(blocks)
    state_of(model).config = HFConfig(ops=("+vision_block",))
    pixels, grid = frames(hf_engine)
    with torch.inference_mode():
        ours = model.model.visual(pixels, grid_thw=grid).pooler_output
        assert calls == {"layer_norm": 1, "add_layer_norm": 2 * len(blocks) - 1}
        for b in blocks:
            del b.forward
        ref = model.model.visual(pixels, grid_thw=grid).pooler_output
    assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-5), (ours - ref).abs().max()


def test_on_the_cpu_the_activation_is_the_modules_own_tanh_gelu(hf_engine: HFEngine) -> None:
    # torch._addmm_activation computes the exact (erf) GELU on the CPU: it must not run there.
    mlp = hf_engine.model.model.visual.blocks[0].mlp
    x = torch.randn(7, mlp.linear_fc1.in_features)
    with torch.no_grad():
        got = vision_block.fc1_gelu(mlp, x, tanh=True)
        pre = mlp.linear_fc1(x)
        assert torch.equal(got, torch.nn.functional.gelu(pre, approximate="tanh"))
        assert not torch.allclose(got, torch.nn.functional.gelu(pre), rtol=0, atol=1e-7)


def test_scores_agree_with_the_op_on_and_off_and_off_runs_the_class_forward(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    cls = type(hf_engine.model.model.visual.blocks[0])
    calls = [0]
    original: Callable[..., Any] = cls.forward

    def counting(self: Any, *a: Any, **kw: Any) -> Any:
        calls[0] += 1
        return original(self, *a, **kw)

    monkeypatch.setattr(cls, "forward", counting)
    reqs = [ScoreRequest(f"v{i}", "What is shown?\nA. a cat\nB. a dog\nAnswer with the letter.",
                         images=(make_jpeg(10 + i), make_jpeg(20 + i))) for i in range(2)]
    on, off = variant(hf_engine, "+vision_block"), variant(hf_engine, "-vision_block")
    got_on = on.score_sync(reqs)  # type: ignore[attr-defined]
    assert calls[0] == 0
    got_off = off.score_sync(reqs)  # type: ignore[attr-defined]
    assert calls[0] > 0  # every block through transformers' forward
    for a, b in zip(got_on, got_off, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert [e["token"] for e in a.top] == [e["token"] for e in b.top]
        lp_a, lp_b = (torch.tensor([float(e["logprob"]) for e in r.top]) for r in (a, b))
        assert torch.allclose(lp_a, lp_b, atol=1e-5), (lp_a - lp_b).abs().max()


def _fresh(tiny_model: Path) -> Any:
    tf = transformers_module()
    return tf.Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, dtype=torch.float32,
                                                              attn_implementation="sdpa").eval()


def test_the_install_check_refuses_a_block_without_what_it_reads(tiny_model: Path) -> None:
    path = [p for p in fast_paths() if p.name == PATH]
    model = _fresh(tiny_model)
    del model.model.visual.blocks[0].mlp.act_fn
    report = install_fast_paths(model, fuse=False, paths=path)
    assert report.fell_back == {PATH: "Qwen3VLVisionMLP has no act_fn"} and not report.installed
    assert not any("forward" in vars(b) for b in model.model.visual.blocks)
    # A block whose norm is another module is left as it is, and said so (never silently slower).
    model = _fresh(tiny_model)
    blocks = model.model.visual.blocks
    blocks[1].norm2 = torch.nn.RMSNorm(blocks[1].norm2.normalized_shape)
    report = install_fast_paths(model, fuse=False, paths=path)
    assert report.fell_back == {PATH: f"{len(blocks) - 1} of {len(blocks)} modules changed"}
    assert "forward" not in vars(blocks[1]) and "forward" in vars(blocks[0])


def test_the_op_switch_and_the_config_hash(tiny_model: Path) -> None:
    cfg = HFConfig.parse(["ops=-vision_block"])
    assert not cfg.op("vision_block", cuda=True) and not cfg.op("vision_block", cuda=False)
    assert HFConfig().op("vision_block", cuda=True) and not HFConfig().op("vision_block", cuda=False)
    assert HFConfig.parse(["ops=+vision_block"]).op("vision_block", cuda=False)
    hashes = {HFConfig().hash, cfg.hash, HFConfig(ops=("+vision_block",)).hash}
    assert len(hashes) == 3
    assert HFConfig.from_dict(json.loads('{"ops": "-vision_block"}')).hash == cfg.hash


@pytest.mark.gpu
def test_on_cuda_the_gelu_epilogue_is_the_tanh_gelu() -> None:
    from transformers.activations import ACT2FN

    torch.manual_seed(0)
    mlp = torch.nn.Module()
    mlp.linear_fc1 = torch.nn.Linear(256, 1024).cuda().bfloat16()
    mlp.act_fn = ACT2FN[vision_block.TANH_GELU]
    x = torch.randn(3000, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        got = vision_block.fc1_gelu(mlp, x, tanh=True).float()
        want = torch.nn.functional.gelu(mlp.linear_fc1(x).float(), approximate="tanh")
    # bf16 rounding of the product (once in the epilogue, twice in the plain ops), nothing more
    assert (got - want).abs().max() <= 0.02 * want.abs().max()
