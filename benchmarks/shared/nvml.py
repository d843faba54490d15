"""NVML readings while a block runs: the GPU busy fraction, SM clock, board power and the reasons
the driver gives for holding the clock down (all absent without NVML or CUDA)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import torch

REASONS = {0x4: "power cap", 0x8: "hw slowdown", 0x20: "sw thermal", 0x40: "hw thermal", 0x80: "power brake"}


class Sample(NamedTuple):
    """One NVML reading."""

    busy: int  # % of the sample period a kernel ran
    mhz: int  # SM clock
    watts: float  # board power
    reasons: int  # clock-limit reason bits (REASONS)


class Nvml:
    """NVML samples (utilization, SM clock, power, clock-limit reasons) taken every ``period``
    seconds while a block runs (none without NVML)."""

    def __init__(self) -> None:
        self.handle: Any = None
        with contextlib.suppress(Exception):
            import pynvml  # type: ignore[import-not-found, unused-ignore]

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

    @contextlib.contextmanager
    def sampling(self, period: float = 0.01) -> Iterator[list[Sample]]:
        got: list[Sample] = []
        stop = threading.Event()
        thread = None
        if self.handle is not None:
            import pynvml

            h = self.handle
            # Renamed in newer NVML bindings ("throttle" became "event"); either answers the same bits.
            why: Any = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", lambda _: 0)

            def run() -> None:
                while not stop.wait(period):
                    with contextlib.suppress(Exception):
                        got.append(Sample(pynvml.nvmlDeviceGetUtilizationRates(h).gpu,
                                          pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                                          pynvml.nvmlDeviceGetPowerUsage(h) / 1000, why(h)))

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
        try:
            yield got
        finally:
            stop.set()
            if thread is not None:
                thread.join()


class Busy:
    """GPU busy fraction over a block, from NVML utilization samples every 20 ms, with the SM
    clock (MHz) and the board's power (W) of the same samples (all nan without NVML). The clock
    matters: under a long run of products the H200 holds its clock below the one of a short peak
    product (power cap), which is why items/s follow the host (``benchmarks/gemm_clock.py``)."""

    def __init__(self, device: torch.device) -> None:
        self.nvml = Nvml() if device.type == "cuda" else None
        self.samples: list[Sample] = []

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        if self.nvml is None:
            yield
            return
        with self.nvml.sampling(0.02) as self.samples:
            yield

    def mean(self, field_: str) -> float:
        return float(np.mean([getattr(s, field_) for s in self.samples])) if self.samples else float("nan")

    def fraction(self) -> float:
        return self.mean("busy") / 100
