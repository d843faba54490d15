"""The Triton kernel of ``hf_silu.silu_mul_kernel`` (imported only where Triton is installed).

One program reads ``BLOCK`` elements of gate and of up once, computes ``silu(gate) * up`` in
float32 and writes the output's dtype once (round to nearest, as ``Tensor.to``).
"""

import triton
import triton.language as tl


@triton.jit  # type: ignore[untyped-decorator]
def silu_mul_kernel(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n
    g = tl.load(gate_ptr + at, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + at, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + at, (g / (1.0 + tl.exp(-g)) * u).to(out_ptr.dtype.element_ty), mask=mask)
