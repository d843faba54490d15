"""The Triton kernel of the gate/up products with SiLU-times-up in their epilogue, and its launcher
``swiglu_packed`` (imported only where Triton is installed; the contract is ``kernels.swiglu``).

The gate and up weights come packed (``kernels.swiglu.pack_gate_up``): each ``BLOCK_N`` rows are
``BLOCK_N / 2`` rows of the gate weight, then the same rows of the up weight. So one product
tile, (``BLOCK_M`` rows of x) x (``BLOCK_N`` packed rows), holds both halves of ``BLOCK_N / 2``
output columns: the products accumulate in float32 as one ``tl.dot`` (a 128 x 256 tile is
Hopper's widest tensor-core instruction), and the epilogue splits the accumulator, applies
``silu(gate) * up`` and writes that tile once, rounded to the output's dtype. Loads and the
store go through tensor descriptors (TMA): tiles past the matrices' edges read zeros and are
not written. The programs are persistent: as many as the grid launches, each walking the tiles
in steps of the grid, in groups of ``GROUP_M`` row blocks so that a group's weights stay in L2.

``swiglu_tuned`` is the same kernel with its tile sizes, warps, stages and group chosen by timing
each of ``CONFIGS`` on the first call for each weight shape, dtype and size class of
the rows (``M_CLASS``, which the kernel itself does not use).
"""

import contextlib
from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from benchcheck.engines.hf.kernels.swiglu import BIG_ROWS, HALF, supported

# (block_m, block_k, warps, stages, group_m): the tiles the kernel is timed in on its first call
# for a weight shape and a size class of the rows (``swiglu_tuned``); every one
# is 2 * HALF packed rows wide. H200 (decision 028): 128/64/8/3 in groups of 16 was the fastest at
# the one-frame batch, the ramp's 4,096 rows and the 2B width in every timing; groups of 8 came
# within 1-9 % of it, close enough that the tuner took them twice in one run (the ramp's rows
# then 5 % slower than cuBLAS), so they are not offered. The 64-row tile is for other widths.
CONFIGS = ((128, 64, 8, 3, 16), (64, 64, 4, 4, 16))


@triton.jit  # type: ignore[untyped-decorator]
def swiglu_packed_kernel(x_desc, w_desc, o_desc, M, N, K, M_CLASS,  # type: ignore[no-untyped-def]
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         PRECISION: tl.constexpr):
    half: tl.constexpr = BLOCK_N // 2
    blocks_m = tl.cdiv(M, BLOCK_M)
    blocks_n = tl.cdiv(N, half)
    in_group = GROUP_M * blocks_n
    for tile in tl.range(tl.program_id(0), blocks_m * blocks_n, tl.num_programs(0), flatten=True):
        first_m = (tile // in_group) * GROUP_M
        group_m = tl.minimum(blocks_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % group_m
        pid_n = (tile % in_group) // group_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            acc = tl.dot(x_desc.load([pid_m * BLOCK_M, k * BLOCK_K]),
                         w_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T, acc, input_precision=PRECISION)
        gate, up = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, half)), (0, 2, 1)))
        o_desc.store([pid_m * BLOCK_M, pid_n * half], (gate / (1.0 + tl.exp(-gate)) * up).to(o_desc.dtype))


def set_blocks(nargs: dict[str, Any]) -> None:
    """The tuner's pre-hook: each descriptor's block shape for the configuration being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [bn, bk]
    nargs["o_desc"].block_shape = [bm, bn // 2]


def _configs() -> list[triton.Config]:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": 2 * HALF, "BLOCK_K": k, "GROUP_M": g}, num_warps=w, num_stages=s,
                          pre_hook=set_blocks) for m, k, w, s, g in CONFIGS]


swiglu_tuned = triton.autotune(_configs(), key=["N", "K", "M_CLASS"])(swiglu_packed_kernel)


def swiglu_packed(x: torch.Tensor, packed: torch.Tensor, config: tuple[int, int, int, int, int] | None = None,
                  programs: int | None = None) -> torch.Tensor:
    """``silu(x @ w_gate.T) * (x @ w_up.T)`` as (rows, N) in x's dtype from the packed weights,
    both products accumulated in float32 and rounded once (float32 inputs multiply in full
    float32). ``config``: one of ``CONFIGS``; None: the fastest of them, timed on the first call
    (CUDA only). ``programs``: how many persistent programs (default: one an SM)."""
    if not supported(x, packed, tuned=config is None):
        raise ValueError(f"swiglu: x {tuple(x.shape)} {x.dtype} {x.device} over packed weights "
                         f"{tuple(packed.shape)} {packed.dtype} {packed.device}: want (rows, K) over (2N, K) in runs "
                         f"of {2 * HALF} rows, one float dtype (float32 on a device: with a config), rows "
                         f"contiguous and 16-byte aligned, on a device with TMA")
    rows, n, k = x.shape[0], packed.shape[0] // 2, packed.shape[1]
    out = torch.empty(rows, n, device=x.device, dtype=x.dtype)
    if rows == 0:
        return out
    if programs is None:
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    bm, bk, warps, stages, group = config or CONFIGS[0]  # the tuner's pre-hook sets its own blocks
    descs = (TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(packed, [2 * HALF, bk]),
             TensorDescriptor.from_tensor(out, [bm, HALF]))
    args = (*descs, rows, n, k, int(rows >= BIG_ROWS))
    precision = "ieee" if x.dtype == torch.float32 else "tf32"

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (min(programs, triton.cdiv(rows, meta["BLOCK_M"]) * triton.cdiv(n, HALF)),)

    # Triton launches on the current CUDA device (the CPU: Triton's interpreter, for tests).
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():
        if config is None:
            swiglu_tuned[grid](*args, PRECISION=precision)
        else:
            swiglu_packed_kernel[grid({"BLOCK_M": bm})](
                *args, BLOCK_M=bm, BLOCK_N=2 * HALF, BLOCK_K=bk, GROUP_M=group, PRECISION=precision,
                num_warps=warps, num_stages=stages)
    return out
