"""The Qwen3-VL vision block with fewer passes over its activations (op ``vision_block``, decision 102).

transformers' vision block is ``h = x + attn(norm1(x)); h + fc2(gelu(fc1(norm2(h))))``: each
LayerNorm, the GELU and each residual add is its own element-wise kernel over (tokens, hidden) or
(tokens, 4 x hidden), and on the H200 those kernels ran far below the device's bandwidth (the
lead's profile: docs/decisions/102). This forward computes the same function with
- ``norm1`` compiled (one Triton kernel) and the attention's residual add with ``norm2`` as one
  compiled function returning both the sum and its norm;
- ``fc1``'s bias and the tanh GELU in the product's epilogue on CUDA (cuBLASLt's GELU_BIAS through
  ``torch._addmm_activation``), where the config's activation is the tanh GELU. On the CPU that op
  computes the exact (erf) GELU, so elsewhere the module's own activation runs after ``fc1``;
- ``fc2`` and its residual add as transformers runs them (a product with its bias, one add).

The op is read from the config in force at each call (``ModelState.config``): off, the class's
own forward runs, so one model compares both ways (gpu_screen's ``vision-block`` rows).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from benchcheck.engines.hf.kernels import layer_norm as norm_contract
from benchcheck.engines.hf.kernels import triton_available
from benchcheck.engines.hf.kernels.layer_norm import add_layer_norm, layer_norm
from benchcheck.engines.hf.model.fused import compile_enabled
from benchcheck.engines.hf.model.state import state_of

BLOCK_CLASS = "Qwen3VLVisionBlock"
TANH_GELU = "gelu_pytorch_tanh"  # the activation cuBLASLt's GELU epilogue computes (tanh approximation)


def fc1_gelu(mlp: Any, x: torch.Tensor, tanh: bool) -> torch.Tensor:
    """``act_fn(linear_fc1(x))`` for 2-D ``x``; on CUDA with the tanh GELU (``tanh``), the bias and
    the activation in the product's epilogue."""
    fc1 = mlp.linear_fc1
    if tanh and x.is_cuda:
        return torch._addmm_activation(fc1.bias, x, fc1.weight.t(), use_gelu=True)
    return mlp.act_fn(fc1(x))  # type: ignore[no-any-return]


def _plain(block: Any) -> bool:
    """The block's parts are the plain modules this forward reads the parameters of."""
    norms = (block.norm1, block.norm2)
    linears = (block.mlp.linear_fc1, block.mlp.linear_fc2)
    return (all(type(n) is torch.nn.LayerNorm and n.weight is not None and n.bias is not None
                and len(n.normalized_shape) == 1 for n in norms)
            and all(type(lin) is torch.nn.Linear and lin.bias is not None for lin in linears))


def use_fused_vision_blocks(model: Any, compiler: Callable[..., Any] | None = None) -> int:
    """Install the fused forward on every plain vision block of ``model``; returns how many
    changed. ``compiler`` defaults to ``torch.compile(dynamic=True)`` (a new token count does not
    recompile) where the model is on CUDA with Triton, else the functions run eagerly."""
    if compiler is None:
        on_gpu = compile_enabled(next(model.parameters()).device)
        compiler = (lambda f: torch.compile(f, dynamic=True)) if on_gpu else (lambda f: f)
    compiled_norm, compiled_add_norm = compiler(layer_norm), compiler(add_layer_norm)
    state = state_of(model)

    def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor | None = None) -> bool:
        """The one-pass Triton kernel runs this norm (op ``vision_norm_kernel``, CUDA)."""
        return (state.config.op("vision_norm_kernel") and x.is_cuda and triton_available()
                and norm_contract.supported(x, weight, bias, y))

    def norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        if kernel(x, weight, bias):
            from benchcheck.engines.hf.kernels.layer_norm_triton import layer_norm_kernel

            return layer_norm_kernel(x, weight, bias, eps)
        return compiled_norm(x, weight, bias, eps)  # type: ignore[no-any-return]

    def add_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        if kernel(x, weight, bias, y):
            from benchcheck.engines.hf.kernels.layer_norm_triton import add_layer_norm_kernel

            return add_layer_norm_kernel(x, y, weight, bias, eps)
        return compiled_add_norm(x, y, weight, bias, eps)  # type: ignore[no-any-return]

    visual = model.model.visual
    tanh = getattr(visual.config, "hidden_act", None) == TANH_GELU

    # The next fused block of each block, and [a block's output, the next block's norm1 of it]:
    # a block's last residual add is computed with the next block's norm1, which takes it when
    # its input is that very tensor (the tower hands each block's output to the next as it is).
    following: dict[Any, Any] = {}
    carried: list[torch.Tensor | None] = [None, None]

    def forward(self: Any, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                **kwargs: Any) -> torch.Tensor:
        if not state.config.op("vision_block", hidden_states.is_cuda) or hidden_states.dim() != 2:
            carried[:] = [None, None]
            return type(self).forward(self, hidden_states, cu_seqlens, position_embeddings,  # type: ignore[no-any-return]
                                      **kwargs)
        x, n1, n2 = hidden_states, self.norm1, self.norm2
        normed1 = carried[1] if carried[0] is x else norm(x, n1.weight, n1.bias, n1.eps)
        carried[:] = [None, None]
        attended = self.attn(normed1, cu_seqlens=cu_seqlens, position_embeddings=position_embeddings, **kwargs)
        h, normed = add_norm(x, attended, n2.weight, n2.bias, n2.eps)
        mlp_out = self.mlp.linear_fc2(fc1_gelu(self.mlp, normed, tanh))
        nxt = following.get(self)
        if nxt is None:
            return h + mlp_out  # type: ignore[no-any-return]
        out, normed_next = add_norm(h, mlp_out, nxt.norm1.weight, nxt.norm1.bias, nxt.norm1.eps)
        carried[:] = [out, normed_next]
        return out

    fused = [b for b in visual.blocks if type(b).__name__ == BLOCK_CLASS and _plain(b)]
    for block in fused:
        block.forward = types.MethodType(forward, block)
    following.update(zip(visual.blocks[:-1], visual.blocks[1:], strict=True))
    for block in [b for b, nxt in following.items() if b not in fused or nxt not in fused]:
        del following[block]
    return len(fused)
