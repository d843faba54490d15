"""The device's clocks for a benchmark: waiting for queued work, and the matrix-product rate a
row's limit column divides by."""

from __future__ import annotations

import time

import torch


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
