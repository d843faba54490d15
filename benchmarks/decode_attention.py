"""A decode step's attention over the sweep's reservation, each way the engine can run it (issue 43).

One new token a row attends over every row's reserved keys and values (8B heads: 32 query heads
over 8 K/V heads, 128 wide; 54,400 slots a row, the sweep's 582-frame item with its 128 new
tokens), at 1-8 rows (the sweep's calls make batches of 1, 2 and 5 rows, decision 117):

  products  ``attention.decode.decode_attention`` as the engine runs it by default: scores and
            values as batched matrix products, a float32 softmax, the values in blocks of 128 keys
  split     the same through the split Triton kernel (``kernels.decode_split``) at every row count
  chosen    what the engine runs with op ``decode_split`` on (``decode_attention(split=True)``)
  split[T]  with ``--tunings T,...`` or ``--grid``: the kernel launched as ``decode_split.Tuning``
            label T says (keys an inner step / warps / stages, ``@programs``, ``+torch`` for the
            spans combined by torch's operations instead of the combine kernel); ``--programs N,...``
            is short for the default launch aiming at N programs a step (fewer, longer spans or
            more, shorter ones)
  limit     the keys and values read once at the copy bandwidth measured here

Each row: ms a call launched from Python (median of alternating rounds of 50 calls), and on CUDA
``graph_ms``, a call inside a captured CUDA graph of ``LAYERS`` calls replayed (the engine replays
its decode steps as graphs, so this is the device time a step pays; the eager time adds the host's
launches, which at few rows are most of it); GB/s of keys and values read at the graph time, and
the largest difference to the same attention in float32. On the CPU (``--tiny``): a small shape,
the products alone (the kernel runs on CUDA).

Run (GPU): PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.decode_attention --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.hf.attention.decode import decode_attention
from benchcheck.engines.hf.kernels import triton_available
from benchcheck.engines.hf.kernels.decode_split import TUNING, Tuning
from benchmarks.shared.device import copy_bandwidth, device_for, sync


def inputs(rows: int, keys: int, heads: int, kv_heads: int, dim: int, written: int, device: torch.device,
           dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """A step's query (a view of the (B, 1, H, D) projection), a reservation of keys and values,
    and the mask of its first ``written`` slots."""
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(rows, 1, heads, dim, device=device, generator=g).to(dtype).transpose(1, 2)
    k = torch.randn(rows, kv_heads, keys, dim, device=device, generator=g).to(dtype)
    v = torch.randn(rows, kv_heads, keys, dim, device=device, generator=g).to(dtype)
    mask = torch.zeros(rows, 1, 1, keys, dtype=torch.bool, device=device)
    mask[..., :written] = True
    return q, k, v, mask


def timed(fn: Callable[[], object], reps: int) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


LAYERS = 36  # calls a captured graph holds: a step of the 8B's language model


def graphed(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    """``calls`` calls of ``fn`` captured as one CUDA graph; returns its replay. Warmed on a side
    stream first, as ``torch.cuda.graph`` wants (the kernel compiled, cuBLAS's workspace set)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    replay: Callable[[], None] = graph.replay
    return replay


def one_batch(rows: int, keys: int, device: torch.device, bandwidth: float, rounds: int, reps: int,
              shape: tuple[int, int, int], tunings: tuple[Tuning, ...] = ()) -> dict[str, Any]:
    heads, kv_heads, dim = shape
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    q, k, v, mask = inputs(rows, keys, heads, kv_heads, dim, keys - 64, device, dtype)
    scale = dim**-0.5
    ways: dict[str, Callable[[], torch.Tensor]] = {"products": lambda: decode_attention(q, k, v, mask, scale)}
    if device.type == "cuda" and triton_available():
        from benchcheck.engines.hf.kernels.decode_split_triton import split_decode_attention

        ways["split"] = lambda: split_decode_attention(q, k, v, mask, scale)
        ways["chosen"] = lambda: decode_attention(q, k, v, mask, scale, split=True)
        for tuning in tunings:
            ways[f"split[{tuning.label()}]"] = partial(split_decode_attention, q, k, v, mask, scale, tuning)
    exact = decode_attention(q.float(), k.float(), v.float(), mask, scale)
    diffs = {name: float((fn().float() - exact).abs().max()) for name, fn in ways.items()}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for fn in ways.values():
        fn()
    for r in range(rounds):
        for name in list(ways) if r % 2 == 0 else list(reversed(ways)):
            times[name].append(timed(ways[name], reps))
    graph_times: dict[str, list[float]] = {name: [] for name in ways}
    if device.type == "cuda":
        replays = {name: graphed(fn, LAYERS) for name, fn in ways.items()}
        for r in range(rounds):
            for name in list(ways) if r % 2 == 0 else list(reversed(ways)):
                graph_times[name].append(timed(replays[name], max(1, reps // 5)) / LAYERS)
        replays.clear()
    read = 2.0 * k.numel() * k.element_size()
    row: dict[str, Any] = {"rows": rows, "keys": keys, "kv_gb": read / 1e9,
                           "limit_ms": 1e3 * read / bandwidth if bandwidth == bandwidth else float("nan")}
    for name, ts in times.items():
        ms = 1e3 * statistics.median(ts)
        graph_ms = 1e3 * statistics.median(graph_times[name]) if graph_times[name] else float("nan")
        row[name] = {"ms": ms, "graph_ms": graph_ms, "gb_s": read / (graph_ms if graph_ms == graph_ms else ms) / 1e6,
                     "max_diff_fp32": diffs[name]}
    print(f"rows {rows} keys {keys}: K/V {read / 1e9:.1f} GB, limit {row['limit_ms']:.3f} ms; " + "; ".join(
        f"{name} {row[name]['ms']:.3f} ms eager, {row[name]['graph_ms']:.3f} in a graph "
        f"({row[name]['gb_s']:.0f} GB/s, diff {row[name]['max_diff_fp32']:.1e})" for name in times), flush=True)
    return row


def fastest(result: dict[str, Any]) -> list[tuple[str, float]]:
    """The ways by their graph times summed over the batches' rows (eager times off CUDA), fastest first."""
    batches = result["batches"]
    ways = [k for k, v in batches[0].items() if isinstance(v, dict)]
    key = "graph_ms" if all(b[w]["graph_ms"] == b[w]["graph_ms"] for b in batches for w in ways) else "ms"
    return sorted(((w, sum(b[w][key] for b in batches)) for w in ways), key=lambda t: t[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the CPU: a small shape, the products alone")
    ap.add_argument("--rows", default="1,2,3,4,5,8", help="decode batches' rows")
    ap.add_argument("--keys", type=int, default=54_400, help="reserved slots a row")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--programs", default="", help="comma-separated program targets to time the kernel at too")
    ap.add_argument("--tunings", default="", help="comma-separated kernel launches (decode_split.Tuning labels, "
                    "e.g. 128/8/2@2048+torch) to time too")
    ap.add_argument("--grid", action="store_true", help="also every launch of keys 64/128, warps 4/8, stages 2-4, "
                    "and the default launch with the other combine")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    args = ap.parse_args()
    device = device_for(args.tiny, "decode_attention")
    bandwidth = copy_bandwidth(device)
    shape = (8, 2, 16) if args.tiny else (32, 8, 128)
    keys = 512 if args.tiny else args.keys
    try:
        tunings = [Tuning(programs=int(n)) for n in args.programs.split(",") if n]
        tunings += [Tuning.parse(t) for t in args.tunings.split(",") if t]
    except ValueError as err:
        raise SystemExit(f"decode_attention: {err}") from None
    if args.grid:
        tunings += [Tuning(block_n=n, warps=w, stages=st) for n in (64, 128) for w in (4, 8) for st in (2, 3, 4)]
        tunings += [replace(TUNING, fused_combine=not TUNING.fused_combine)]
    tunings = list(dict.fromkeys(t for t in tunings if t != TUNING))  # the default runs as ``split``
    result: dict[str, Any] = {"copy_bandwidth_gbs": bandwidth / 1e9, "heads": shape, "torch": torch.__version__,
              "default_tuning": TUNING.label(),
              "batches": [one_batch(int(r), keys, device, bandwidth, 2 if args.tiny else args.rounds,
                                    2 if args.tiny else 50, shape, tuple(tunings)) for r in args.rows.split(",")]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if len(result["batches"]) > 1:
        ranked = fastest(result)[:4]
        print("fastest over all rows in a graph: " + ", ".join(f"{name} {ms:.3f} ms" for name, ms in ranked))
    (out / "decode_attention.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out / 'decode_attention.json'}")


if __name__ == "__main__":
    main()
