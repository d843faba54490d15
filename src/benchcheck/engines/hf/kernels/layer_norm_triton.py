"""The vision tower's LayerNorm, with or without the residual add before it, as one Triton pass (CUDA).

A program holds ``ROWS`` whole rows: it reads ``x`` (and ``y``) once, writes ``x + y`` rounded to
the inputs' dtype (as torch's addition rounds it) and the norm of that rounded sum, computed in
float32 (the mean, then the variance of the centred values, as ``nn.LayerNorm`` computes them)
and rounded once to the output's dtype. Imported only where Triton is installed; the references
are ``kernels.layer_norm``'s.
"""

import contextlib

import torch
import triton
import triton.language as tl

from benchcheck.engines.hf.kernels.layer_norm import supported

ELEMENTS = 8192  # elements of each input a program holds (rows x the padded row)
WARPS = 8


def add_layer_norm_kernel(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x + y, layer_norm(x + y))`` for 2-D ``x`` and ``y`` of one shape and dtype."""
    if not supported(x, weight, bias, y):
        raise ValueError(f"add_layer_norm: x {tuple(x.shape)} {x.dtype}, y {tuple(y.shape)} {y.dtype}, weight "
                         f"{tuple(weight.shape)}, bias {tuple(bias.shape)}: not inputs the kernel takes")
    # Contiguous first: ``empty_like`` keeps a dense input's strides, and the kernel writes rows in order.
    x, y = x.contiguous(), y.contiguous()
    h = torch.empty_like(x)
    return h, _launch(x, y, weight, bias, eps, h)


def layer_norm_kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """``layer_norm(x)`` over the last dimension of 2-D ``x``."""
    if not supported(x, weight, bias):
        raise ValueError(f"layer_norm: x {tuple(x.shape)} {x.dtype}, weight {tuple(weight.shape)}, bias "
                         f"{tuple(bias.shape)}: not inputs the kernel takes")
    x = x.contiguous()
    return _launch(x, x, weight, bias, eps, None)


def _launch(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
            h: torch.Tensor | None) -> torch.Tensor:
    rows, n = x.shape
    block_n = triton.next_power_of_2(n)
    per = max(1, ELEMENTS // block_n)
    out = torch.empty_like(x)
    # Triton launches on the current device (on the CPU only in Triton's interpreter, for tests).
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():
        add_layer_norm_jit[(triton.cdiv(rows, per),)](
            x, y, weight.contiguous(), bias.contiguous(), out if h is None else h, out, rows, n, float(eps),
            HAS_Y=h is not None, BLOCK_N=block_n, ROWS=per, num_warps=WARPS)
    return out


@triton.jit  # type: ignore[untyped-decorator]
def add_layer_norm_jit(x_ptr, y_ptr, w_ptr, b_ptr, h_ptr, out_ptr, rows, n, eps,  # type: ignore[no-untyped-def]
                       HAS_Y: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_N)
    inside = c < n
    mask = (r < rows)[:, None] & inside[None, :]
    at = r[:, None] * n + c[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0)
    if HAS_Y:
        y = tl.load(y_ptr + at, mask=mask, other=0.0)
        # Rounded to nearest, as torch rounds x + y (Triton's interpreter truncates instead).
        h = (x.to(tl.float32) + y.to(tl.float32)).to(h_ptr.dtype.element_ty, fp_downcast_rounding="rtne")
        tl.store(h_ptr + at, h, mask=mask)
        v = h.to(tl.float32)
    else:
        v = x.to(tl.float32)
    mean = tl.sum(v, axis=1) / n
    d = tl.where(mask, v - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / n + eps)
    w = tl.load(w_ptr + c, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + at, (d * rstd[:, None] * w[None, :] + b[None, :]).to(out_ptr.dtype.element_ty), mask=mask)
