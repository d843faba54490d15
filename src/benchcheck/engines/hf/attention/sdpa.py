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
    """Which SDPA shapes cuDNN has built a plan for in this process, so a small shape seen for the
    first time runs without building one (op ``new_shape_flash``, decision 111).

    cuDNN builds an execution plan on the host for every new shape (decision 107: 32-42 ms for
    the 8B's prefill, about as much for the vision tower), and a generation prefill's length is
    new at almost every batch: a short prefill's device then waits for the plan. Where the call is
    small (``max_flops`` or fewer attention FLOPs) the first forward that meets a shape runs it with
    cuDNN off (SDPA's next choice, FlashAttention, builds nothing, at a small extra device time);
    a shape met again in a later forward recurs, so cuDNN builds its plan then and keeps it. Each
    forward starts with ``forward()``: its layers, calls of one shape, all choose alike."""

    def __init__(self, max_flops: float, remember: int = 4096) -> None:
        self.max_flops = max_flops
        self.remember = remember
        self.planned: set[tuple[object, ...]] = set()  # shapes run on cuDNN's kernel: their plan is built
        self.met: dict[tuple[object, ...], int] = {}  # small shapes run without -> the forward that met them
        self.forwards = 0

    def forward(self) -> None:
        """A new forward begins."""
        self.forwards += 1

    def kernels(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                causal: bool) -> contextlib.AbstractContextManager[None]:
        """The kernels for one SDPA call: cuDNN off for the block where the shape is small and met
        first in this forward, SDPA's own choice otherwise."""
        shape = (tuple(query.shape), tuple(key.shape), tuple(value.shape), query.stride(), key.stride(),
                 value.stride(), query.dtype, causal)
        if shape in self.planned or query.dim() != 4:
            return contextlib.nullcontext()
        b, h, lq, d = query.shape
        flops = 4.0 * b * h * lq * key.shape[-2] * d / (2 if causal else 1)
        first = self.met.get(shape, self.forwards)
        if flops > self.max_flops or first != self.forwards:
            self.planned.add(shape)
            self.met.pop(shape, None)
            return contextlib.nullcontext()
        self.met[shape] = first
        while len(self.met) > self.remember:  # the oldest first met (dicts keep their order)
            del self.met[next(iter(self.met))]
        return _cudnn_off()
