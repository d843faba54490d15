"""How fast the H200's matrix products run when they run for long, and why (issue 15).

gpu_screen.py's limit column divides a workload's FLOPs by a bf16 8192^3 product timed for about
20 calls: a burst, at whatever clock the device holds then. A screening batch runs its products
back to back for seconds. This script times the same products both ways and samples, through
NVML every 10 ms, the SM clock, the board's power and the reasons the driver gives for holding the
clock down (power cap, thermal), so that a row's rate can be read against the clock it ran at.

Rows:
  burst       the 8192^3 product, median of 20 calls after 3 (what gpu_screen calls the peak)
  sustained   the same product back to back for --seconds, in windows of ~0.25 s
  layer       the one-frame batch's decoder-layer products (--tokens rows: q, k/v, o, gate/up,
              down), each sustained for --seconds / 2 in two layouts, alternating twice:
              ``linear`` (x @ W.T, W stored (out, in) as nn.Linear keeps it: the engine's) and
              ``kn`` (x @ W, W stored (in, out)); same FLOPs, cuBLAS picks its kernel per layout.
  after idle  the burst again after 2 s of idling (does the clock come back?)

Run (GPU): PYTHONPATH=src python3 -m benchmarks.gemm_clock --out $OUT
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchmarks.shared.nvml import REASONS, Nvml, Sample

HIDDEN, INTER, KV = 4096, 12288, 1024  # Qwen3-VL-8B's text model: hidden, MLP width, k/v width


@dataclass
class Window:
    """One stretch of back-to-back calls and what NVML saw meanwhile."""

    tflops: float
    mhz: float = float("nan")
    watts: float = float("nan")
    reasons: list[str] = field(default_factory=list)


def described(w: Window, got: list[Sample]) -> Window:
    """``w`` with the mean clock and power of ``got`` and every clock-limit reason seen in it."""
    if got:
        w.mhz = statistics.fmean(s.mhz for s in got)
        w.watts = statistics.fmean(s.watts for s in got)
        bits = 0
        for s in got:
            bits |= s.reasons
        w.reasons = [name for bit, name in REASONS.items() if bits & bit]
    return w


def window(nvml: Nvml, fn: Callable[[], object], flops: float, calls: int) -> Window:
    """``calls`` back-to-back calls, timed with CUDA events; NVML sampled meanwhile."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with nvml.sampling() as got:
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
    return described(Window(flops * calls / (a.elapsed_time(b) / 1e3) / 1e12), got)


def sustained(nvml: Nvml, fn: Callable[[], object], flops: float, seconds: float) -> list[Window]:
    """Back-to-back calls for ``seconds``, in windows of ~0.25 s (the call count from a probe)."""
    probe = window(nvml, fn, flops, 3)
    calls = max(1, round(0.25 / (flops / (probe.tflops * 1e12))))
    out: list[Window] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        out.append(window(nvml, fn, flops, calls))
    return out


def burst(nvml: Nvml, fn: Callable[[], object], flops: float) -> Window:
    """gpu_screen's peak: the median of 20 single timed calls after 3 untimed (NVML sampled over
    all 20: one call is shorter than a sample)."""
    for _ in range(3):
        fn()
    times = []
    with nvml.sampling() as got:
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
    return described(Window(flops / statistics.median(times) / 1e12), got)


def summary(ws: list[Window]) -> dict[str, Any]:
    tail = ws[len(ws) // 2:]  # the settled half
    return {"first": asdict(ws[0]), "settled_tflops": statistics.fmean(w.tflops for w in tail),
            "settled_mhz": statistics.fmean(w.mhz for w in tail),
            "settled_watts": statistics.fmean(w.watts for w in tail),
            "reasons": sorted({r for w in ws for r in w.reasons}), "windows": [asdict(w) for w in ws]}


def sustained_peak(seconds: float = 3.0) -> dict[str, Any]:
    """The 8192^3 bf16 product back to back for ``seconds``: its settled TFLOP/s, SM clock, power
    and clock-limiting reasons (gpu_screen's limit at the clock a long run holds)."""
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    s = summary(sustained(Nvml(), lambda: big @ big, 2 * 8192**3, seconds))
    return {"tflops": s["settled_tflops"], "mhz": s["settled_mhz"], "watts": s["settled_watts"],
            "reasons": s["reasons"]}


def show(name: str, s: dict[str, Any]) -> None:
    f = s["first"]
    print(f"  {name:28s} first {f['tflops']:6.1f} TFLOP/s @ {f['mhz']:6.0f} MHz {f['watts']:5.0f} W | "
          f"settled {s['settled_tflops']:6.1f} @ {s['settled_mhz']:6.0f} MHz {s['settled_watts']:5.0f} W | "
          f"{', '.join(s['reasons']) or '-'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0, help="how long each sustained row runs")
    ap.add_argument("--tokens", type=int, default=36_864, help="token rows of the layer products (one-frame batch)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gemm_clock needs a CUDA device")
    torch.manual_seed(0)
    dev, dt = torch.device("cuda"), torch.bfloat16
    nvml = Nvml()
    if nvml.handle is None:
        print("  (no NVML: clock and power columns are nan)")
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "tokens": args.tokens}
    big = torch.randn(8192, 8192, device=dev, dtype=dt)
    f_big = 2 * 8192**3

    def mm_big() -> object:
        return big @ big

    b = burst(nvml, mm_big, f_big)
    res["burst"] = asdict(b)
    print(f"  {'burst 8192^3':28s} {b.tflops:6.1f} TFLOP/s @ {b.mhz:6.0f} MHz {b.watts:5.0f} W", flush=True)
    res["sustained"] = summary(sustained(nvml, mm_big, f_big, args.seconds))
    show("sustained 8192^3", res["sustained"])

    t = args.tokens
    x = torch.randn(t, HIDDEN, device=dev, dtype=dt)
    xi = torch.randn(t, INTER, device=dev, dtype=dt)
    layer: dict[str, Any] = {}
    for name, inp, n_in, n_out in (("q / o", x, HIDDEN, HIDDEN), ("k / v", x, HIDDEN, KV),
                                   ("gate / up", x, HIDDEN, INTER), ("down", xi, INTER, HIDDEN)):
        w_lin = torch.randn(n_out, n_in, device=dev, dtype=dt).mul_(n_in**-0.5)
        w_kn = w_lin.t().contiguous()
        flops = 2 * t * n_in * n_out
        fns: dict[str, Callable[[], object]] = {
            "linear": partial(torch.nn.functional.linear, inp, w_lin),
            "kn": partial(torch.matmul, inp, w_kn),
        }
        for k in (1, 2):
            for lay, fn in fns.items():
                s = summary(sustained(nvml, fn, flops, args.seconds / 2))
                layer[f"{name} {lay} {k}"] = s
                show(f"{name} {lay} #{k}", s)
    res["layer"] = layer
    torch.cuda.synchronize()
    time.sleep(2.0)
    res["after_idle"] = asdict(burst(nvml, mm_big, f_big))
    a = res["after_idle"]
    print(f"  {'burst after 2 s idle':28s} {a['tflops']:6.1f} TFLOP/s @ {a['mhz']:6.0f} MHz {a['watts']:5.0f} W",
          flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gemm_clock.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
