"""SiLU-times-up (the gated activation of the Qwen3-VL text MLP): the reference and the inputs
the Triton kernel (``silu_triton``) takes."""

from __future__ import annotations

import torch

DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # what the kernel computes exactly in float32


def supported(gate: torch.Tensor, up: torch.Tensor) -> bool:
    """Inputs the kernel takes: two tensors of one shape, float dtype and device."""
    return gate.shape == up.shape and gate.dtype == up.dtype and gate.device == up.device and gate.dtype in DTYPES


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """The gated activation of transformers' Qwen3-VL text MLP (``act_fn(gate) * up``, SiLU)."""
    return torch.nn.functional.silu(gate) * up
