"""How fast the vision towers' matrix products run, and whether another way runs them faster (issue 43).

The 2B 32-frame step spends most of its device time in the vision tower's products (decision 104):
their inner dimension is the tower's width (1,024 for the 2B, 1,152 for the 8B), short for a
product of tens of thousands of rows. Two parts:

  products  each product of a vision block (qkv, proj, fc1 with its GELU, fc2) and the 8B's at
            the sweep's row count, timed in alternating rounds, each of these ways:
              linear        ``F.linear(x, W, b)``: W stored (out, in), as ``nn.Linear`` keeps it
                            (what transformers runs; fc1: ``torch._addmm_activation``, the
                            engine's GELU epilogue)
              linear_kn     the same call with W's storage column-major (``W.t().contiguous().t()``:
                            the same tensor, another layout, so cuBLAS runs another kernel)
              nobias        ``x @ W.T`` without the bias (what the product alone costs)
              nobias_kn     the same with the column-major W
              compiled      ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the linear
                            (Triton's templates against cuBLAS; ``--autotune``, the
                            2B's products)
            TFLOP/s (median of the rounds) and the largest difference to the float32 product on
            the first 256 rows (``nobias``: to the product alone, without bias or GELU).
  call      the 2B 32-frame scoring call (the engine, ``gpu_screen``'s video32 requests) with the
            vision tower's linear weights in each layout, alternating; items/s and the largest
            difference of the letters' log-probabilities between the layouts.

Run (GPU): PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.vision_gemm --out $OUT
Run (CPU): PYTHONPATH=src python -m benchmarks.vision_gemm --tiny   (plumbing only)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.shared.device import device_for, matmul_peak, sync


@dataclass(frozen=True)
class Shape:
    name: str
    m: int
    k: int
    n: int
    gelu: bool = False


def vision_shapes(m: int, hidden: int, mlp: int, tag: str) -> list[Shape]:
    return [Shape(f"{tag} qkv", m, hidden, 3 * hidden), Shape(f"{tag} proj", m, hidden, hidden),
            Shape(f"{tag} fc1+gelu", m, hidden, mlp, gelu=True), Shape(f"{tag} fc2", m, mlp, hidden)]


def column_major(w: torch.Tensor) -> torch.Tensor:
    """``w`` with the same shape and values, its storage column-major."""
    return w.t().contiguous().t()


def product(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, gelu: bool) -> torch.Tensor:
    if gelu and b is not None and x.is_cuda:
        return torch._addmm_activation(b, x, w.t(), use_gelu=True)
    y = F.linear(x, w, b)
    return F.gelu(y, approximate="tanh") if gelu else y


def time_fn(fn: Callable[[], object], reps: int) -> float:
    """Seconds a call (events on CUDA, the wall clock elsewhere), over ``reps`` calls."""
    if torch.cuda.is_available():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def one_shape(sh: Shape, device: torch.device, rounds: int, reps: int, autotune: bool) -> dict[str, Any]:
    """``sh``'s product each way (``products``), in alternating rounds."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(sh.m, sh.k, device=device, dtype=dtype, generator=g)
    w = torch.randn(sh.n, sh.k, device=device, dtype=dtype, generator=g) / sh.k**0.5
    b = torch.randn(sh.n, device=device, dtype=dtype, generator=g)
    wc = column_major(w)
    ways: dict[str, Callable[[], torch.Tensor]] = {
        "linear": lambda: product(x, w, b, sh.gelu),
        "linear_kn": lambda: product(x, wc, b, sh.gelu),
        "nobias": lambda: x @ w.t(),
        "nobias_kn": lambda: x @ wc.t(),
    }
    if autotune and device.type == "cuda" and sh.name.startswith("2B"):
        compiled = torch.compile(lambda xx: product(xx, w, b, sh.gelu), mode="max-autotune-no-cudagraphs",
                                 dynamic=False)
        t0 = time.perf_counter()
        compiled(x)
        sync()
        print(f"  {sh.name}: autotuned in {time.perf_counter() - t0:.1f} s", flush=True)
        ways["compiled"] = lambda: compiled(x)
    head = x[:256].float()
    refs = {True: product(head, w.float(), b.float(), sh.gelu), False: head @ w.float().t()}
    diffs = {k: float((fn()[:256].float() - refs[not k.startswith("nobias")]).abs().max()) for k, fn in ways.items()}
    for fn in ways.values():
        fn()
    sync()
    times: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(rounds):
        for k in list(ways) if r % 2 == 0 else list(reversed(ways)):
            times[k].append(time_fn(ways[k], reps))
    flops = 2.0 * sh.m * sh.k * sh.n
    med = {k: statistics.median(v) for k, v in times.items()}
    return {**asdict(sh), "ways": {k: {"ms": 1e3 * med[k], "tflops": flops / med[k] / 1e12, "max_diff_fp32": diffs[k]}
                                   for k in times}}


def products(shapes: list[Shape], device: torch.device, rounds: int, reps: int, autotune: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for sh in shapes:
        row = one_shape(sh, device, rounds, reps, autotune)
        out.append(row)
        print(f"{sh.name:18} M={sh.m:7} K={sh.k:5} N={sh.n:5} " + "  ".join(
            f"{k} {v['tflops']:6.1f} TF/s ({v['ms']:.3f} ms, diff {v['max_diff_fp32']:.1e})"
            for k, v in row["ways"].items()), flush=True)
    return out


def set_layout(module: torch.nn.Module, kn: bool) -> int:
    """Every ``nn.Linear`` weight of ``module`` column-major (``kn``) or row-major again; how many."""
    n = 0
    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.data = column_major(m.weight.data) if kn else m.weight.data.contiguous()
            n += 1
    return n


def call_part(tiny_dir: Path | None, device: torch.device, scale: float, rounds: int) -> dict[str, Any]:
    from benchcheck.engines.base import LetterScores
    from benchmarks.gpu_screen import build, free
    from benchmarks.shared.workloads import jpeg, synthetic_items, visual

    engine = build("qwen3-vl-2b", tiny_dir, device)
    frames = [jpeg(s) for s in range(64)]
    reqs = visual(synthetic_items(max(8, int(96 * scale)), 30, 4), 3, frames, 32)
    tower = engine.model.model.visual
    engine.score_sync(reqs)  # warm-up: compiles and plans every shape of the call
    rates: dict[str, list[float]] = {"row-major": [], "column-major": []}
    scores: dict[str, list[Any]] = {}
    for r in range(rounds):
        for layout in (("row-major", "column-major") if r % 2 == 0 else ("column-major", "row-major")):
            linears = set_layout(tower, layout == "column-major")
            sync()
            t0 = time.perf_counter()
            res = engine.score_sync(reqs)
            sync()
            rates[layout].append(len(reqs) / (time.perf_counter() - t0))
            scores[layout] = [[float(e["logprob"]) for e in x.exact] if isinstance(x, LetterScores) else None
                              for x in res]
    diff = max(abs(a - b) for ra, rb in zip(scores["row-major"], scores["column-major"], strict=True)
               if ra is not None and rb is not None for a, b in zip(ra, rb, strict=True))
    set_layout(tower, False)
    free(engine)
    row = {"items": len(reqs), "linears": linears, "items_per_s": rates,
           "median": {k: statistics.median(v) for k, v in rates.items()}, "max_logprob_diff": diff}
    print(f"call: {len(reqs)} requests, {linears} linears; " + ", ".join(
        f"{k} {', '.join(f'{x:.2f}' for x in v)} items/s" for k, v in rates.items())
        + f"; largest letter log-prob difference between layouts {diff:.2e}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the CPU: small shapes and the tiny model (plumbing only)")
    ap.add_argument("--parts", default="products,call")
    ap.add_argument("--rows", default="57344,114688", help="2B row counts (patches a tower forward) to time")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--autotune", action="store_true", help="also Triton's autotuned products (torch.compile)")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the call part's 96 items")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    args = ap.parse_args()
    device = device_for(args.tiny, "vision_gemm")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    result: dict[str, Any] = {"matmul_peak_tflops": matmul_peak(device), "device": str(device),
                              "torch": torch.__version__}
    print(f"matmul peak {result['matmul_peak_tflops']:.4g} TFLOP/s", flush=True)
    if "products" in parts:
        if args.tiny:
            shapes = vision_shapes(512, 32, 64, "tiny")
        else:
            shapes = [s for m in (int(r) for r in args.rows.split(",")) for s in vision_shapes(m, 1024, 4096, "2B")]
            shapes += vision_shapes(211_848, 1152, 4304, "8B sweep")
        result["products"] = products(shapes, device, 2 if args.tiny else args.rounds, 2 if args.tiny else 20,
                                      args.autotune)
    if "call" in parts:
        tiny_dir = None
        if args.tiny:
            from benchcheck.testing import build_tiny_model

            tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
        result["call"] = call_part(tiny_dir, device, 0.1 if args.tiny else args.scale, 2 if args.tiny else args.rounds)
    (out / "vision_gemm.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out / 'vision_gemm.json'}")


if __name__ == "__main__":
    main()
