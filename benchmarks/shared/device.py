"""The device's clocks for a benchmark: waiting for queued work, and the matrix-product rate a
row's limit column divides by."""

from __future__ import annotations

import time

import torch


def device_for(tiny: bool, script: str) -> torch.device:
    """The CPU for a ``--tiny`` run, else CUDA; a script that needs CUDA and finds none exits saying so."""
    if not tiny and not torch.cuda.is_available():
        raise SystemExit(f"{script}: needs a CUDA device (or --tiny)")
    return torch.device("cpu" if tiny else "cuda")


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def matmul_peak(device: torch.device) -> float:
    """TFLOP/s of a large matrix product (bf16 8192^3 on CUDA, float32 1024^3 on the CPU)."""
    n, dtype = (8192, torch.bfloat16) if device.type == "cuda" else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync()
    reps = 10
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def copy_bandwidth(device: torch.device) -> float:
    """Bytes per second a large device-to-device copy moves (read + write): the rate a
    memory-bound step (a decode step reading the weights and the K/V cache) can reach; nan off CUDA."""
    if device.type != "cuda":
        return float("nan")
    bufs = [torch.empty(4 << 30, dtype=torch.uint8, device=device) for _ in range(2)]
    bufs[1].copy_(bufs[0])
    sync()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        bufs[1].copy_(bufs[0])
        sync()
        best = min(best, time.perf_counter() - t0)
    bufs.clear()
    torch.cuda.empty_cache()
    return 2 * (4 << 30) / best
