"""The Triton kernel of ``hf_swiglu.swiglu_packed`` (imported only where Triton is installed).

The gate and up weights come packed (``hf_swiglu.pack_gate_up``): each ``BLOCK_N`` rows are
``BLOCK_N / 2`` rows of the gate weight, then the same rows of the up weight. So one product
tile, (``BLOCK_M`` rows of x) x (``BLOCK_N`` packed rows), holds both halves of ``BLOCK_N / 2``
output columns: the products accumulate in float32 as one ``tl.dot`` (a 128 x 256 tile is
Hopper's widest tensor-core instruction), and the epilogue splits the accumulator, applies
``silu(gate) * up`` and writes that tile once, rounded to the output's dtype. Loads and the
store go through tensor descriptors (TMA): tiles past the matrices' edges read zeros and are
not written. The programs are persistent: as many as the grid launches, each walking the tiles
in steps of the grid, in groups of ``GROUP_M`` row blocks so that a group's weights stay in L2.

``swiglu_tuned`` is the same kernel with its tile sizes, warps, stages and group chosen by timing
each of ``hf_swiglu.CONFIGS`` on the first call for each weight shape, dtype and size class of
the rows (``M_CLASS``, which the kernel itself does not use).
"""

import triton
import triton.language as tl


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


def _configs() -> list[triton.Config]:
    from benchcheck.engines.hf_swiglu import CONFIGS, HALF, set_blocks

    return [triton.Config({"BLOCK_M": m, "BLOCK_N": 2 * HALF, "BLOCK_K": k, "GROUP_M": g}, num_warps=w, num_stages=s,
                          pre_hook=set_blocks) for m, k, w, s, g in CONFIGS]


swiglu_tuned = triton.autotune(_configs(), key=["N", "K", "M_CLASS"])(swiglu_packed_kernel)
