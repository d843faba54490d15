"""Where the sweep's long prefill and decode steps, and the 2B 32-frame step, spend device time.

Three parts (random-weight true-shape Qwen3-VL models, bf16, one GPU):
  kernels   one layer's causal attention at the sweep's length (54,000+ tokens, 8B heads: 32
            query heads over 8 K/V heads) and at the 2B 32-frame step's (rows of ~1,900 tokens,
            16 over 8 heads), on each kernel SDPA can run: ms and TFLOP/s (causal: 2 L^2 H D
            multiply-adds... counted as 4 L(L+1)/2 H D FLOPs), and the largest difference to the
            flash kernel's output.
  sweep     one 582-frame item (416x224 frames, 8B): the vision tower alone, the prefill
            (1 new token), 4 and 128 new tokens; the decode step's time against its memory limit
            (the bytes a step reads: the language model's weights and the K/V cache, at the copy
            bandwidth measured here); a device profile of one prefill by kernel category.
  video32   the 2B 32-frame scoring workload: one call's device profile by kernel category.
  scored    the sweep's prefill (4 items of 582 frames, 1 new token each) with op
            ``scored_last_layer`` on and off, in alternating rounds: seconds an item (median and
            spread over the rounds) and each way's device time by kernel category (one call).
  padded    a generation batch of two long rows of unequal length (8B, 416x224 frames, 4 new
            tokens), as the sweep's calls cut its fps ladders: padded on the right with a causal
            prefill (op ``right_prefill``, ours), on the left with a mask (the way before), each
            row alone (two calls), and the limit (both rows' FLOPs at the matmul peak); op rows
            alternate (decision 106).

Run (GPU): PYTHONPATH=src:. python3 -m benchmarks.long_prefill --out $OUT
Run (CPU): PYTHONPATH=src python -m benchmarks.long_prefill --tiny   (plumbing only)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchcheck.engines.base import GenerateRequest
from benchcheck.engines.hf.engine import HFEngine
from benchmarks.shared.device import copy_bandwidth, matmul_peak, sync
from benchmarks.shared.flops import grids_of, item_flops
from benchmarks.shared.workloads import jpeg, synthetic_items, visual

CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("flash", "fmha", "cudnn", "attention", "attn", "sdpa", "varlen")),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "sm90", "cublas", "matmul", "splitk")),
    ("triton", ("triton",)),
    ("copy", ("copy", "memcpy", "memset", "cat", "index", "gather", "scatter")),
)


def category(name: str) -> str:
    low = name.lower()
    for cat, keys in CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other elementwise"


def timed(fn: Callable[[], object], reps: int = 3) -> float:
    """Best wall time of ``reps`` calls after one warm-up, seconds (device synchronized)."""
    fn()
    sync()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def device_profile(fn: Callable[[], object]) -> dict[str, Any]:
    """Device time of one call by kernel category, the top kernels, and the call's wall time."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        fn()
        sync()
    wall = time.perf_counter() - t0
    kernels: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            k = kernels.setdefault(ev.name, [0.0, 0])
            k[0] += ev.device_time_total / 1e3  # ms
            k[1] += 1
    cats: dict[str, float] = {}
    for name, (ms, _) in kernels.items():
        cats[category(name)] = cats.get(category(name), 0.0) + ms
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:30]
    return {"wall_ms": wall * 1e3, "device_ms": sum(cats.values()), "by_category_ms": cats,
            "top": [{"kernel": n[:160], "ms": round(v[0], 3), "count": int(v[1]), "cat": category(n)}
                    for n, v in top]}


def attention_kernels(device: torch.device, length: int, rows: int, heads: int, kv_heads: int,
                      dim: int = 128) -> list[dict[str, Any]]:
    """One layer's causal attention on each SDPA kernel (and FlashAttention-2 varlen)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator(device=device).manual_seed(0)
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    q = torch.randn(rows, heads, length, dim, device=device, dtype=dt, generator=g)
    k = torch.randn(rows, kv_heads, length, dim, device=device, dtype=dt, generator=g)
    v = torch.randn(rows, kv_heads, length, dim, device=device, dtype=dt, generator=g)
    rep = heads // kv_heads
    flops = rows * 4.0 * heads * dim * length * (length + 1) / 2
    out: list[dict[str, Any]] = []
    ref: torch.Tensor | None = None

    def sdpa(backends: list[Any], gqa: bool) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            with sdpa_kernel(backends):
                if gqa:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                ke, ve = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
                return F.scaled_dot_product_attention(q, ke, ve, is_causal=True)
        return run

    def varlen() -> torch.Tensor:
        qt = q.transpose(1, 2).reshape(rows * length, heads, dim)
        kt = k.transpose(1, 2).reshape(rows * length, kv_heads, dim)
        vt = v.transpose(1, 2).reshape(rows * length, kv_heads, dim)
        cu = torch.arange(0, rows * length + 1, length, device=device, dtype=torch.int32)
        o: torch.Tensor = torch.ops.aten._flash_attention_forward(qt, kt, vt, cu, cu, length, length, 0.0, True,
                                                                  False, scale=dim**-0.5)[0]
        return o.view(rows, length, heads, dim).transpose(1, 2)

    flex_fn: list[Callable[..., torch.Tensor]] = []

    def flex() -> torch.Tensor:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        if not flex_fn:
            def causal(b: Any, h: Any, qi: Any, ki: Any) -> Any:
                return qi >= ki

            mask = create_block_mask(causal, None, None, length, length, device=str(device))
            compiled = torch.compile(flex_attention)
            flex_fn.append(lambda: compiled(q, k, v, block_mask=mask, enable_gqa=True))
        return flex_fn[0]()

    every = list(SDPBackend.__members__.values())
    cases: list[tuple[str, Callable[[], torch.Tensor]]] = [
        ("sdpa's choice, enable_gqa", sdpa([b for b in every if b.name not in ("ERROR", "OVERRIDEABLE")], True)),
        ("flash, enable_gqa", sdpa([SDPBackend.FLASH_ATTENTION], True)),
        ("cudnn, enable_gqa", sdpa([SDPBackend.CUDNN_ATTENTION], True)),
        ("cudnn, K/V repeated", sdpa([SDPBackend.CUDNN_ATTENTION], False)),
        ("efficient, K/V repeated", sdpa([SDPBackend.EFFICIENT_ATTENTION], False)),
        ("flash-2 varlen (aten)", varlen),
        ("flex attention (compiled), causal block mask", flex),
    ]
    repeat_s = timed(lambda: (k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)))
    for name, fn in cases:
        try:
            s = timed(fn)
            o = fn()
            if ref is None:
                ref = o
            diff = float((o.float() - ref.float()).abs().max())
            out.append({"kernel": name, "ms": s * 1e3, "tflops": flops / s / 1e12, "max_diff_vs_first": diff})
        except Exception as e:  # a kernel that cannot take these inputs: say so, go on
            out.append({"kernel": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
        torch.cuda.empty_cache() if device.type == "cuda" else None
    out.append({"kernel": "(K/V repeat alone)", "ms": repeat_s * 1e3})
    for r in out:
        print(f"  L={length} rows={rows} {heads}/{kv_heads}: {json.dumps(r)}", flush=True)
    return out


def vision_attention(device: torch.device, images: int, length: int, heads: int, dim: int) -> list[dict[str, Any]]:
    """The vision tower's attention (every image its own sequence, no mask) as the engine calls it
    (q, k, v strided views of one qkv projection) and the other ways it could: ms per layer."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    seq = images * length
    qkv = torch.randn(seq, 3 * heads * dim, device=device, dtype=dt)
    scale = dim**-0.5
    flops = 4.0 * images * heads * length * length * dim

    def views() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = qkv.view(seq, 3, heads, dim).unbind(1)
        return tuple(x.reshape(images, length, heads, dim).transpose(1, 2) for x in (q, k, v))  # type: ignore[return-value]

    def run(backends: list[Any] | None, contiguous: bool = False, pad: int = 0) -> Callable[[], torch.Tensor]:
        def fn() -> torch.Tensor:
            q, k, v = views()
            if contiguous:
                q, k, v = (x.contiguous() for x in (q, k, v))
            if pad:
                q, k, v = (F.pad(x, (0, pad - dim)) for x in (q, k, v))
            ctx = sdpa_kernel(backends) if backends else contextlib.nullcontext()
            with ctx:
                o = F.scaled_dot_product_attention(q, k, v, scale=scale)
            return o[..., :dim] if pad else o
        return fn

    cases = [
        ("engine now: sdpa's choice, strided views", run(None)),
        ("flash, strided views", run([SDPBackend.FLASH_ATTENTION])),
        ("cudnn, strided views", run([SDPBackend.CUDNN_ATTENTION])),
        ("sdpa's choice, contiguous", run(None, contiguous=True)),
        ("efficient, strided views", run([SDPBackend.EFFICIENT_ATTENTION])),
    ]
    if dim % 64:
        up = -(-dim // 64) * 64
        cases += [(f"cudnn, zero-padded to {up}", run([SDPBackend.CUDNN_ATTENTION], pad=up)),
                  (f"flash, zero-padded to {up}", run([SDPBackend.FLASH_ATTENTION], pad=up))]
    out: list[dict[str, Any]] = []
    ref = None
    for name, fn in cases:
        try:
            sec = timed(fn)
            o = fn()
            ref = o if ref is None else ref
            out.append({"way": name, "ms": sec * 1e3, "tflops": flops / sec / 1e12,
                        "max_diff_vs_first": float((o.float() - ref.float()).abs().max())})
        except Exception as e:
            out.append({"way": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
    for r in out:
        print(f"  vision {images}x{length} {heads}h d{dim}: {json.dumps(r)}", flush=True)
    return out


def module_split(engine: HFEngine, fn: Callable[[], object]) -> dict[str, float]:
    """Device time of the vision tower and of the language model within one call: CUDA events
    recorded (in stream order) when each module's forward starts and ends; ms, summed over calls."""
    if engine.device.type != "cuda":
        return {}
    spans: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = {"vision": [], "language": []}
    handles = []
    for name, mod in (("vision", engine.model.model.visual), ("language", engine.model.model.language_model)):
        def pre(_m: Any, _a: Any, name: str = name) -> None:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            spans[name].append((ev, ev))

        def post(_m: Any, _a: Any, _o: Any, name: str = name) -> None:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            spans[name][-1] = (spans[name][-1][0], ev)

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    try:
        fn()
        sync()
    finally:
        for h in handles:
            h.remove()
    return {k: sum(a.elapsed_time(b) for a, b in v) for k, v in spans.items()}


def sweep_part(engine: HFEngine, n_frames: int, bw: float, peak: float) -> dict[str, Any]:
    frames = [jpeg(1000 + s, 416, 224) for s in range(16)]
    req = GenerateRequest("g0", "Question: what happens in the video?\nAnswer in one sentence.",
                          tuple(frames[k % len(frames)] for k in range(n_frames)), max_tokens=128)
    p = engine.encoder.encode(req.prompt, req.images, None)
    cfg = engine.model.config
    res: dict[str, Any] = {"prompt_tokens": p.n_tokens, "frames": n_frames}
    res["split_ms"] = module_split(engine, lambda: engine.generate_sync([replace(req, max_tokens=1)]))
    stop = engine.stop_ids
    engine.stop_ids = set()
    try:
        for n in (1, 4, 128):
            one = replace(req, max_tokens=n)
            res[f"generate_{n}_s"] = timed(lambda one=one: engine.generate_sync([one]), reps=1)  # type: ignore[misc]
            print(f"  sweep: {n} new tokens {res[f'generate_{n}_s']:.3f} s", flush=True)
        res["prefill_profile"] = device_profile(lambda: engine.generate_sync([replace(req, max_tokens=1)]))
        res["decode4_profile"] = device_profile(lambda: engine.generate_sync([replace(req, max_tokens=8)]))
        eager = engine.with_config(engine.config.with_ops("-decode_graphs"))
        eager.decode_graphs.fixed_steps = True
        eager.stop_ids = set()
        res["eager_fixed_12_s"] = timed(lambda: eager.generate_sync([replace(req, max_tokens=12)]), reps=1)
        res["eager_fixed_profile"] = device_profile(lambda: eager.generate_sync([replace(req, max_tokens=12)]))
    finally:
        engine.stop_ids = stop
    t = cfg.text_config
    lm_bytes = sum(x.numel() * x.element_size() for x in engine.model.model.language_model.parameters())
    lm_bytes += engine.model.lm_head.weight.numel() * engine.model.lm_head.weight.element_size()
    kv_bytes = 2 * t.num_hidden_layers * t.num_key_value_heads * t.head_dim * (p.n_tokens + 64) * 2
    res["decode_step_ms"] = (res["generate_128_s"] - res["generate_4_s"]) / 124 * 1e3
    res["decode_step_limit_ms"] = (lm_bytes + kv_bytes) / bw * 1e3 if bw == bw else float("nan")
    res["bytes_per_step_gb"] = (lm_bytes + kv_bytes) / 1e9
    prefill_flops = item_flops(cfg, p.n_tokens, grids_of(p))
    res["prefill_limit_s"] = prefill_flops / (peak * 1e12)
    res["prefill_tflops"] = prefill_flops / res["generate_1_s"] / 1e12
    print(f"  sweep: {json.dumps({k: v for k, v in res.items() if not k.endswith('profile')})}", flush=True)
    return res


def scored_part(engine: HFEngine, n_frames: int, rounds: int, items: int = 4) -> dict[str, Any]:
    """The sweep's prefill with the last decoder layer at each row's last token (op
    ``scored_last_layer``, ours) and over every position, alternating (``rounds`` each)."""
    frames = [jpeg(1000 + s, 416, 224) for s in range(16)]
    reqs = [GenerateRequest(f"g{i}", f"Question {i}: what happens in the video?\nAnswer in one sentence.",
                            tuple(frames[(i + k) % len(frames)] for k in range(n_frames)), max_tokens=1)
            for i in range(items)]
    ways = {"scored": engine, "full": engine.with_config(engine.config.with_ops("-scored_last_layer"))}
    secs: dict[str, list[float]] = {w: [] for w in ways}
    for eng in ways.values():  # warm-up: each way's shapes once
        eng.generate_sync(reqs[:1])
    sync()
    for _ in range(rounds):
        for way, eng in ways.items():
            t0 = time.perf_counter()
            eng.generate_sync(reqs)
            sync()
            secs[way].append((time.perf_counter() - t0) / items)
    res: dict[str, Any] = {"items": items, "frames": n_frames, "rounds": rounds}
    for way, eng in ways.items():
        xs = sorted(secs[way])
        res[way] = {"s_per_item": xs, "median_s": statistics.median(xs),
                    "profile": device_profile(lambda eng=eng: eng.generate_sync(reqs[:1]))}  # type: ignore[misc]
        print(f"  scored: {way} {res[way]['median_s']:.3f} s an item (rounds {', '.join(f'{x:.3f}' for x in xs)}); "
              f"device {res[way]['profile']['device_ms']:.0f} ms for one item", flush=True)
    return res


def padded_part(engine: HFEngine, frames: tuple[int, int], peak: float, rounds: int = 2) -> dict[str, Any]:
    pics = [jpeg(2000 + s, 416, 224) for s in range(16)]
    reqs = [GenerateRequest(f"g{i}", f"Question {i}: what happens in the video?" + " Why?" * i,
                            tuple(pics[k % len(pics)] for k in range(n)), max_tokens=4) for i, n in enumerate(frames)]
    encoded = [engine.encoder.encode(r.prompt, r.images, None) for r in reqs]
    tokens = [e.n_tokens for e in encoded]
    # One batch of both rows: the first chunk takes the call whole.
    ways = {"right": engine.with_config(replace(engine.config.with_ops("+right_prefill"), first_chunk=len(reqs))),
            "left": engine.with_config(replace(engine.config.with_ops("-right_prefill"), first_chunk=len(reqs)))}
    stop = engine.stop_ids
    for e in (engine, *ways.values()):
        e.stop_ids = set()
    try:
        got: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, e in ways.items():
                got[name].append(timed(lambda e=e: e.generate_sync(reqs), reps=1))  # type: ignore[misc]
        alone = sum(timed(lambda r=r: engine.generate_sync([r]), reps=1) for r in reqs)  # type: ignore[misc]
    finally:
        for e in (engine, *ways.values()):
            e.stop_ids = stop
    limit = sum(item_flops(engine.model.config, e.n_tokens, grids_of(e)) for e in encoded) / (peak * 1e12)
    res = {"frames": list(frames), "prompt_tokens": tokens, "right_s": got["right"], "left_s": got["left"],
           "alone_s": alone, "limit_s": limit}
    print(f"  padded: {json.dumps(res)}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--parts", default="kernels,sweep,video32")
    args = ap.parse_args()
    device = torch.device("cpu" if args.tiny else "cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    peak = matmul_peak(device)
    result: dict[str, Any] = {"matmul_peak_tflops": peak}
    bw = copy_bandwidth(device)
    result["copy_bandwidth_gbs"] = bw / 1e9
    print(f"matmul peak {peak:.4g} TFLOP/s, copy bandwidth {bw / 1e9:.0f} GB/s", flush=True)
    tiny_dir = None
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    if "kernels" in parts:
        if args.tiny:
            result["kernels"] = attention_kernels(device, 256, 1, 4, 2, 32)
        else:
            result["kernels"] = (attention_kernels(device, 54159, 1, 32, 8)
                                 + attention_kernels(device, 1920, 12, 16, 8))
    if "vision" in parts:
        shapes = [(8, 16, 4, 32)] if args.tiny else [(582, 364, 16, 72), (128, 448, 16, 72), (128, 448, 16, 64),
                                                            (96, 112 * 4, 16, 72)]
        result["vision"] = [vision_attention(device, *sh[:4]) for sh in shapes]
    from benchmarks.gpu_screen import build, free

    if "sweep" in parts:
        engine = build("qwen3-vl-8b", tiny_dir, device)
        result["sweep"] = sweep_part(engine, 16 if args.tiny else 582, bw, peak)
        free(engine)
    if "scored" in parts:
        engine = build("qwen3-vl-8b", tiny_dir, device)
        result["scored"] = scored_part(engine, 16 if args.tiny else 582, 2 if args.tiny else 5)
        free(engine)
    if "padded" in parts:
        engine = build("qwen3-vl-8b", tiny_dir, device)
        result["padded"] = padded_part(engine, (12, 9) if args.tiny else (290, 250), peak)
        free(engine)
    if "video32" in parts:
        engine = build("qwen3-vl-2b", tiny_dir, device)
        frames = [jpeg(s) for s in range(64)]
        reqs = visual(synthetic_items(96 if not args.tiny else 8, 30, 4), 3, frames, 32)
        engine.score_sync(reqs)
        t0 = time.perf_counter()
        engine.score_sync(reqs)
        sync()
        rate = len(reqs) / (time.perf_counter() - t0)
        result["video32"] = {"items_per_s": rate, "split_ms": module_split(engine, lambda: engine.score_sync(reqs)),
                             "profile": device_profile(lambda: engine.score_sync(reqs[:48]))}
        print(f"  video32: {rate:.2f} items/s, {len(reqs)} items: {result['video32']['split_ms']}", flush=True)
        free(engine)
    (out / "long_prefill.json").write_text(json.dumps(result, indent=1))
    for key in ("sweep", "video32", "scored"):
        if key in result:
            for prof in ("prefill_profile", "decode4_profile", "eager_fixed_profile", "profile", "scored", "full"):
                pr = result[key].get(prof)
                pr = pr.get("profile") if isinstance(pr, dict) and "profile" in pr else pr
                if pr:
                    print(f"{key} {prof}: wall {pr['wall_ms']:.0f} ms, device {pr['device_ms']:.0f} ms, "
                          f"{json.dumps({k: round(v, 1) for k, v in pr['by_category_ms'].items()})}")
                    for t in pr["top"][:25]:
                        print(f"    {t['ms']:9.2f} ms {t['count']:6d}x [{t['cat']}] {t['kernel'][:110]}")


if __name__ == "__main__":
    main()
