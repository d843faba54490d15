"""Fused element-wise work of the Qwen3-VL vision blocks (CUDA).

transformers runs each vision block as ``x + attn(norm1(x))`` then ``h + mlp(norm2(h))``, the
MLP as ``fc2(gelu_tanh(fc1(n)))``: per block two LayerNorms, two residual additions and a GELU
over the 4x-wide intermediate, each its own pass over memory (the R6 profile of the 2B 32-frame
workload put LayerNorm, GELU and the additions at ~15 % of device time). Here:

- each residual addition and the LayerNorm that follows it run as one compiled kernel writing
  both the sum and its normalized copy: the second norm of a block after its first addition,
  and the first norm of the next block after the block's second addition (handed to the next
  block with the sum it belongs to, checked by identity, so a block called any other way
  normalizes as before);
- on CUDA, fc1's bias and the tanh GELU run in the matrix product's epilogue
  (``torch._addmm_activation``, whose CUDA GELU is the tanh approximation in every path, as
  the vision config's ``gelu_pytorch_tanh``): the intermediate is written once, never re-read
  for the activation. Elsewhere (the CPU's ``_addmm_activation`` applies the exact GELU) it
  is transformers' ``gelu(linear(x), approximate="tanh")``.

Only the vision tower of one model instance changes; ``enabled=False`` restores transformers'
own forwards. Below ``EAGER_ROWS`` rows the same functions run uncompiled.

Not on by default: on the H200 (docs/PERFORMANCE.md, issue 15 round 3) it measured no faster
than transformers' blocks. The fused add+LayerNorm runs at memory bandwidth (0.44 ms on the 2B
tower's 229,376 x 1,024 rows) but saves only ~0.15 ms a call over the two eager kernels, and
the GELU-epilogue matmul takes 3.0 ms where fc2 (same FLOPs, bias only) takes 2.5 ms, most of
the ~0.9 ms the separate GELU pass over the intermediate would cost. ``use_grouped_vision_attention(...,
fuse_blocks=True)`` or ``use_fused_vision_blocks`` turns it on.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from benchcheck.engines.hf_fused import EAGER_ROWS

BLOCK_CLASS = "Qwen3VLVisionBlock"
MLP_CLASS = "Qwen3VLVisionMLP"
TANH_GELU = "gelu_pytorch_tanh"
GELU_EPILOGUE = True  # CUDA: bias + GELU inside fc1's matrix product (gpu_screen can turn it off)


def add_layer_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual sum ``x + y`` and ``nn.LayerNorm`` of it, as transformers computes them."""
    h = x + y
    return h, F.layer_norm(h, (h.shape[-1],), weight, bias, eps)


def fc1_gelu_tanh(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``gelu(linear(x, weight, bias), approximate="tanh")``; on CUDA in the matmul's epilogue."""
    if GELU_EPILOGUE and x.is_cuda and x.dim() == 2:
        return torch._addmm_activation(bias, x, weight.t(), use_gelu=True)
    return F.gelu(F.linear(x, weight, bias), approximate="tanh")


def _mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return self.linear_fc2(fc1_gelu_tanh(x, self.linear_fc1.weight, self.linear_fc1.bias))  # type: ignore[no-any-return]


def _block_forward(self: Any, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor,
                   position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                   **kwargs: Any) -> torch.Tensor:
    handed = self._bc_pre  # [sum, its norm1] from the previous block, or [None, None]
    normed = handed[1] if handed[0] is hidden_states else self.norm1(hidden_states)
    handed[:] = [None, None]  # never kept past this call
    a = self.attn(normed, cu_seqlens=cu_seqlens, position_embeddings=position_embeddings, **kwargs)
    # One rank (rows, width) always for the compiled function; small inputs eagerly.
    step = self._bc_add_norm if hidden_states.dim() == 2 and hidden_states.shape[0] >= EAGER_ROWS else add_layer_norm
    n2 = self.norm2
    h, normed = step(hidden_states, a, n2.weight, n2.bias, n2.eps)
    m = self.mlp(normed)
    nxt = self._bc_next
    if nxt is None:
        return h + m  # type: ignore[no-any-return]
    n1 = nxt.norm1
    out, normed_next = step(h, m, n1.weight, n1.bias, n1.eps)
    nxt._bc_pre[:] = [out, normed_next]
    return out


def use_fused_vision_blocks(model: Any, enabled: bool = True, compiler: Callable[..., Any] | None = None) -> int:
    """Fuse the element-wise work of every vision block of ``model`` (a Qwen3-VL model), or
    restore transformers' forwards (``enabled=False``); returns how many blocks changed.
    ``compiler`` defaults to ``torch.compile(dynamic=True)`` (the patch count varies)."""
    blocks = [b for b in model.model.visual.blocks if type(b).__name__ == BLOCK_CLASS]
    if not enabled:
        for b in blocks:
            for m in (b, b.mlp):
                if "forward" in vars(m):
                    del m.forward
        return len(blocks)
    fn = (compiler or (lambda f: torch.compile(f, dynamic=True)))(add_layer_norm)
    tanh = getattr(model.model.visual.config, "hidden_act", None) == TANH_GELU  # else the MLP stays as it is
    for i, b in enumerate(blocks):
        b._bc_add_norm = fn
        b._bc_pre = [None, None]
        # Not as a module attribute: that would register the next block as a child of this one.
        vars(b)["_bc_next"] = blocks[i + 1] if i + 1 < len(blocks) else None
        b.forward = types.MethodType(_block_forward, b)
        if type(b.mlp).__name__ == MLP_CLASS and tanh:
            b.mlp.forward = types.MethodType(_mlp_forward, b.mlp)
    return len(blocks)
