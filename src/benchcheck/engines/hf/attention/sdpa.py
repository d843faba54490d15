"""Which of SDPA's kernels attention may use where its shapes are new at almost every call.

SDPA ranks cuDNN's kernel first whenever it is merely allowed, and cuDNN builds an execution
graph for every new shape: prefix-shared rows have a new width almost every batch, which cost
the launching thread 6.2 ms a call, 1.35 s per 2.2 s of device work on the 8B blind workload
(H200 profile), so the device waited on the host. So masked attention runs on the
memory-efficient kernel (or the math one, where that cannot take the inputs).

Generation's decode steps run so too (``decode_kernels``): a step that appends to its cache
attends over one key more than the step before, so cuDNN built a graph at every step of every
batch while the device waited (decision 107). Fixed-shape steps (graphs, padded batches) do not
use SDPA at all (``attention.decode.decode_attention``).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator

import torch

MASKED_KERNELS: tuple[str, ...] = ("EFFICIENT_ATTENTION", "MATH")  # SDPA backends for masked attention
# The keyword a forward's ``PlanMemo`` travels by, through transformers' modules, to the attention calls.
PLANS_KWARG = "sdpa_plans"


def masked_attention_kernels(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """On CUDA, only ``MASKED_KERNELS`` for the block; elsewhere nothing changes."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, name) for name in MASKED_KERNELS])


@contextlib.contextmanager
def _cudnn_off() -> Iterator[None]:
    was = torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def decode_kernels(planless: bool) -> contextlib.AbstractContextManager[None]:
    """With ``planless``, SDPA's cuDNN kernel off for the block (the other kernels as they were),
    on every device (the switch only matters on CUDA; elsewhere tests can see it). The switch is
    process-wide: the engine's device lock keeps its own other calls out meanwhile."""
    return _cudnn_off() if planless else contextlib.nullcontext()


class PlanMemo:
    """Which small SDPA shapes cuDNN has a plan for on each thread, so a small shape met for the
    first time runs without building one (op ``new_shape_flash``, decision 111).

    cuDNN builds an execution plan on the host for every new shape, and PyTorch keeps those plans
    per thread; a generation prefill's length is new at almost every batch, so a short prefill's
    device waits for the plan. Where a call is small (``max_flops`` or fewer attention FLOPs) the
    first forward that meets its shape runs it with cuDNN off (SDPA's next choice, FlashAttention,
    builds nothing, at a small extra device time); a shape met again in a later forward recurs,
    so cuDNN builds its plan then, on the thread that runs it, and keeps it there. Larger calls
    keep SDPA's choice: their plan costs less than FlashAttention's extra time over a forward's
    layers. Each forward starts with ``forward()``: its layers, calls of one shape, choose alike.

    The switch (``_cudnn_off``) is process-wide while held: the model's lock keeps the engine's
    other calls out, but two models driven in one process from two threads could see it."""

    def __init__(self, max_flops: float, remember: int = 4096) -> None:
        self.max_flops = max_flops
        # Shapes kept, the oldest dropped: a bound on memory only (a dropped shape is met as new
        # once more, which costs one forward on FlashAttention).
        self.remember = remember
        # (thread, small shape) -> the forward that first met it there: plans are per thread.
        self.met: OrderedDict[tuple[int, tuple[object, ...]], int] = OrderedDict()
        self.forwards = 0

    def forward(self) -> None:
        """A new forward begins."""
        self.forwards += 1

    def kernels(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                causal: bool) -> contextlib.AbstractContextManager[None]:
        """The kernels for one SDPA call: cuDNN off for the block where the shape is small and met
        first in this forward on this thread, SDPA's own choice otherwise."""
        if query.dim() != 4:
            return contextlib.nullcontext()
        b, h, lq, d = query.shape
        if 4.0 * b * h * lq * key.shape[-2] * d / (2 if causal else 1) > self.max_flops:
            return contextlib.nullcontext()
        shape = (tuple(query.shape), tuple(key.shape), tuple(value.shape), query.stride(), key.stride(),
                 value.stride(), query.dtype, causal)
        mine = (threading.get_ident(), shape)
        first = self.met.get(mine, self.forwards)
        self.met[mine] = first
        self.met.move_to_end(mine)
        while len(self.met) > self.remember:
            self.met.popitem(last=False)
        if first != self.forwards:  # met in an earlier forward: it recurs, so its plan pays
            return contextlib.nullcontext()
        return _cudnn_off()
