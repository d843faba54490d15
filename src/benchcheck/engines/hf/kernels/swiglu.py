"""The text MLP's gate and up products with SiLU-times-up in their epilogue, as one Triton
kernel over the two weights packed into one (CUDA, Hopper and later).

The engine's fused MLP ran the gate and the up products through cuBLAS and then ``kernels.silu_triton``'s
one-pass kernel over their outputs: ~3.9 % of a one-frame batch's device time was that pass
(decision 024), and the products wrote twice the bytes the MLP goes on to
read. Here the two weights are packed so that one product tile holds the gate and the up
columns of the same outputs (``pack_gate_up``); the kernel (``kernels.swiglu_triton``) applies
``silu(gate) * up`` to the float32 accumulator and writes the activation once: one kernel, no
gate or up tensor in memory, and one rounding instead of three. On the H200 in sustained
alternating rounds (``benchmarks/lm_kernels.py --swiglu-only``, decision 028): 19.12 ms against
19.96 for cuBLAS and the pass at the one-frame batch (63,488 rows, 8B), 2.59 against 2.81 at
the 2B model's width; the engine's one-frame rows 153.5 / 153.6 against 151.5 / 150.3 items/s
alternating with cuBLAS and the pass. Two weights as nn.Linear keeps them, each tile of the
products would be two narrower products in one program: 12 % slower than cuBLAS (tried first).

The packed copy is made once per MLP, at its first call (``model.fused.packed_gate_up``); the
original weights stay, for transformers' own forward (the reference the benchmarks check
against) and for everything else that reads them. On the 8B model it holds 7.2 GB more.
"""

from __future__ import annotations

import functools

import torch

HALF = 128  # output columns a tile: each packed run is HALF gate rows, then HALF up rows
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
BIG_ROWS = 8192  # rows from here on are one size class for the tuning (fewer, another)


@functools.cache
def _tensor_memory_access(index: int) -> bool:
    """The CUDA device ``index`` has TMA (compute capability 9.0 or later)."""
    return torch.cuda.get_device_capability(index)[0] >= 9


def supported(x: torch.Tensor, packed: torch.Tensor, tuned: bool = True) -> bool:
    """Inputs the kernel takes: x (rows, K) over packed weights (2N, K) (``pack_gate_up``), one
    float dtype, rows contiguous with 16-byte aligned starts and strides, on a device with TMA
    (the CPU: only under Triton's interpreter, for tests). ``tuned``: in ``CONFIGS``' tiles,
    which on a device hold 2-byte elements only (float32's stages would need 320 KB of shared
    memory against the H200's 227 KB: float32 takes a smaller explicit ``config``)."""
    if x.dim() != 2 or packed.dim() != 2 or x.shape[1] != packed.shape[1] or packed.shape[0] % (2 * HALF):
        return False
    if x.dtype != packed.dtype or x.dtype not in DTYPES or x.device != packed.device:
        return False
    size = x.element_size()
    if tuned and x.is_cuda and size > 2:
        return False
    if any(t.stride(1) != 1 or (t.stride(0) * size) % 16 or t.data_ptr() % 16 for t in (x, packed)):
        return False
    return not x.is_cuda or _tensor_memory_access(x.device.index if x.device.index is not None
                                                  else torch.cuda.current_device())


def pack_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor, half: int = HALF) -> torch.Tensor:
    """The gate and up weights (N, K) as one (2N, K) matrix: each run of ``2 * half`` rows is
    ``half`` rows of the gate weight, then the same rows of the up weight."""
    n, k = w_gate.shape
    if w_up.shape != (n, k) or n % half:
        raise ValueError(f"pack_gate_up: gate {tuple(w_gate.shape)} and up {tuple(w_up.shape)} do not split into "
                         f"runs of {half} rows")
    return torch.stack((w_gate.reshape(n // half, half, k), w_up.reshape(n // half, half, k)), 1).reshape(2 * n, k)


def swiglu_reference(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """What the kernel computes from the unpacked weights: ``silu(x @ w_gate.T) * (x @ w_up.T)``,
    the products in float32, rounded once to x's dtype."""
    g, u = x.float() @ w_gate.float().t(), x.float() @ w_up.float().t()
    return (torch.nn.functional.silu(g) * u).to(x.dtype)
