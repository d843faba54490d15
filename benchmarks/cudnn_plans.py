"""What a new attention shape costs: SDPA's cuDNN kernel builds a plan for every new shape.

PyTorch keeps cuDNN attention plans keyed by the exact sizes (batch, heads, query and key lengths)
and strides; a miss builds one on the host while the device waits. The sweep's generation calls
are of a new length nearly every call (its videos and conditions vary), so each call may pay a
build for the language model's prefill and one for each new image count of the vision tower's
grouped attention. Decision 107 has the numbers.

Parts (one GPU, bf16), each mode in its own process (PyTorch reads the environment variable
``TORCH_CUDNN_SDPA_AVOID_RECOMPILE`` once, at the first cuDNN attention):
  sdpa    the language model's causal prefill (8B heads: 32 query over 8 K/V, dim 128, the
          engine's layout: batch, length, heads, dim transposed) at the lengths of the sweep mix's
          calls, and the vision tower's grouped call (16 heads, dim 72, v read in place from the
          qkv product, as ``model.vision`` calls it) at its image counts: each shape's first call
          and the median of three more, ms; build = first - again.
  engine  the 8B HFEngine's ``generate_sync`` (4 new tokens) on calls of two requests whose frame
          counts change call to call, then the same calls again (every shape seen), then new
          counts no longer than seen (the allocator's blocks warm): s per call, with the
          allocator's, dynamo's and the SwiGLU autotuner's counters. ``--profile``: a call of new
          lengths and the same again under the profiler (the device's idle stretches, named by
          the host spans over them), with op ``decode_planless`` on and then off.
Modes: ``cudnn`` (SDPA's own choice, the engine's default), ``ragged`` (the same with
``TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1``: PyTorch's ragged path for contiguous BSHD tensors keys
plans by lengths rounded up to powers of two), ``flash`` (SDPA's flash kernel: no plans; the
sdpa part only).

Run (GPU): PYTHONPATH=src:. python3 -m benchmarks.cudnn_plans --out $OUT
Run (CPU): PYTHONPATH=src python -m benchmarks.cudnn_plans --tiny   (plumbing only)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.shared.device import sync

MODES = ("cudnn", "ragged", "flash")
RAGGED_ENV = "TORCH_CUDNN_SDPA_AVOID_RECOMPILE"
# (rows, tokens a row) of the sweep mix's generation calls (H200 run of decision 101's script).
LM_SHAPES = ((8, 2353), (8, 2699), (8, 5630), (8, 10382), (2, 25845), (8, 13017), (2, 35792), (1, 54159))
# (images, patches an image) of the vision tower's grouped calls: frames of one item at 416x224.
VISION_SHAPES = ((32, 364), (108, 364), (176, 364), (254, 364), (326, 364), (391, 364))
# Frame counts of the engine part's calls: two requests a call, every call new lengths; then
# new lengths again, longest first, none longer than the first set's longest (the allocator's
# cache already holds blocks this large: what is left is per-shape work).
ENGINE_CALLS = ((40, 36), (64, 60), (96, 80), (120, 110), (150, 140), (33, 31))
ENGINE_CALLS_DOWN = ((148, 139), (118, 108), (94, 78), (62, 58), (38, 34))


def first_and_again(fn: Callable[[], object]) -> tuple[float, float]:
    """The first call's wall ms and the median of three more (device synchronized)."""

    def once() -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - t0) * 1e3

    first = once()
    return first, statistics.median(once() for _ in range(3))


def sdpa_part(mode: str, device: torch.device, tiny: bool) -> list[dict[str, Any]]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    heads, kv_heads, dim = (32, 8, 128) if not tiny else (4, 2, 16)
    lm = LM_SHAPES if not tiny else ((2, 100), (1, 180))
    vis = VISION_SHAPES if not tiny else ((4, 64), (6, 64))
    rows: list[dict[str, Any]] = []

    def kernels() -> contextlib.AbstractContextManager[None]:
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION) if mode == "flash" else contextlib.nullcontext()

    for b, n in lm:
        torch.manual_seed(b * 100_003 + n)  # equal inputs in every mode's process: outputs compared
        q = torch.randn(b, n, heads, dim, device=device, dtype=dt).transpose(1, 2)
        k = torch.randn(b, n, kv_heads, dim, device=device, dtype=dt).transpose(1, 2)
        v = torch.randn(b, n, kv_heads, dim, device=device, dtype=dt).transpose(1, 2)

        def lm_call(q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v) -> torch.Tensor:
            with kernels():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=dim ** -0.5)

        rows.append(measure("lm", (b, n), lm_call))
        if "error" not in rows[-1]:
            rows[-1]["sample"] = lm_call()[-1, -1, -16:, :8].float().cpu().tolist()
        del q, k, v
    vheads, vdim = (16, 72) if not tiny else (2, 8)
    for count, n in vis:
        seq = count * n
        qkv = torch.randn(seq, 3 * vheads * vdim, device=device, dtype=dt)
        q = torch.randn(seq, vheads, vdim, device=device, dtype=dt)
        k = torch.randn(seq, vheads, vdim, device=device, dtype=dt)
        v = qkv.view(seq, 3, vheads, -1)[:, 2]

        def split(x: torch.Tensor, c: int = count, n: int = n) -> torch.Tensor:
            return x.reshape(c, n, vheads, -1).transpose(1, 2)

        def vis_call(q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v) -> torch.Tensor:
            with kernels():
                return F.scaled_dot_product_attention(split(q), split(k), split(v), scale=vdim ** -0.5)

        rows.append(measure("vision", (count, n), vis_call))
        del qkv, q, k, v
    return rows


def measure(kind: str, shape: tuple[int, int], fn: Callable[[], object]) -> dict[str, Any]:
    try:
        first, again = first_and_again(fn)
    except RuntimeError as e:  # a kernel that refuses the shape: named, not fatal
        return {"kind": kind, "shape": list(shape), "error": str(e).splitlines()[0][:200]}
    row = {"kind": kind, "shape": list(shape), "first_ms": round(first, 2), "again_ms": round(again, 3),
           "build_ms": round(first - again, 2)}
    print(f"  {kind} {shape}: first {first:.1f} ms, again {again:.2f} ms", flush=True)
    return row


def engine_part(device: torch.device, tiny: bool, profile_calls: bool = False) -> dict[str, Any]:
    from benchcheck.engines.base import GenerateRequest
    from benchmarks.gpu_screen import build
    from benchmarks.shared.workloads import jpeg

    tiny_dir = None
    if tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    engine = build("qwen3-vl-8b", tiny_dir, device)
    engine.stop_ids = set()  # a random-weight model: every answer its 4 new tokens
    pics = [jpeg(2000 + s, 416, 224) for s in range(16)]
    scale = 8 if tiny else 1

    def reqs(frames: tuple[int, int], tag: str) -> list[GenerateRequest]:
        return [GenerateRequest(f"{tag}{i}", f"Question {i}: what happens in the video?",
                                tuple(pics[k % len(pics)] for k in range(max(1, n // scale))), max_tokens=4)
                for i, n in enumerate(frames)]

    engine.generate_sync(reqs((20, 18), "w"))  # compile and allocator warm-up on a shape not timed
    calls = [reqs(f, f"c{j}_") for j, f in enumerate(ENGINE_CALLS)]
    down = [reqs(f, f"d{j}_") for j, f in enumerate(ENGINE_CALLS_DOWN)]
    tokens = [[engine.encoder.encode(r.prompt, r.images, None).n_tokens for r in c] for c in calls + down]
    out: dict[str, Any] = {"frames": [list(f) for f in ENGINE_CALLS + ENGINE_CALLS_DOWN], "prompt_tokens": tokens}
    for name, batch in (("new_s", calls), ("again_s", calls), ("down_new_s", down), ("down_again_s", down)):
        times, notes = [], []
        for c in batch:
            sync()
            before = call_state()
            t0 = time.perf_counter()
            got = engine.generate_sync(c)
            sync()
            times.append(round(time.perf_counter() - t0, 4))
            notes.append(state_delta(before, call_state()))
        out[name] = times
        out[name.replace("_s", "_events")] = notes
        print(f"  {name}: {times} {notes}", flush=True)
    if profile_calls:  # a call of new lengths and a call seen before, each under the profiler
        fresh = reqs((112, 101), "p")
        for name in ("profile_new", "profile_again"):
            out[name] = device_gaps(lambda: engine.generate_sync(fresh))
            print(f"  {name}: {json.dumps(out[name])}", flush=True)
        # The same model with the decode steps on SDPA's own choice (op decode_planless off), on
        # lengths new to both ways: what the op changes is the decode steps' kernels alone.
        off = engine.with_config(engine.config.with_ops("-decode_planless"))
        off.stop_ids = set()
        other = reqs((114, 103), "q")
        for name in ("profile_new_planless_off", "profile_again_planless_off"):
            out[name] = device_gaps(lambda: off.generate_sync(other))
            print(f"  {name}: {json.dumps(out[name])}", flush=True)
    out["texts"] = [getattr(r, "text", repr(r)) for r in got]  # the last call's answers, compared across modes
    print(f"  engine: new {sum(out['new_s']):.2f} s, again {sum(out['again_s']):.2f} s over {len(calls)} calls",
          flush=True)
    return out


def device_gaps(fn: Callable[[], object], min_ms: float = 1.0, top: int = 12) -> dict[str, Any]:
    """One call under the profiler: its wall, the device's kernel time (the union of kernels), and
    the largest stretches with no kernel running, each named by the host operations that span
    most of it (innermost first): where the device waits on the host."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    events = prof.events()
    kernels = sorted((e.time_range.start, e.time_range.end) for e in events if e.device_type.name == "CUDA")
    host = [(e.time_range.start, e.time_range.end, e.name) for e in events if e.device_type.name == "CPU"]
    return holes_named(kernels, host, min_ms, top)


def holes_named(kernels: list[tuple[float, float]], host: list[tuple[float, float, str]], min_ms: float,
                top: int) -> dict[str, Any]:
    """``device_gaps``'s arithmetic on (start, end) kernels and (start, end, name) host spans, µs."""
    if not kernels or not host:
        return {"kernels": len(kernels)}
    t0 = min(h[0] for h in host)
    t1 = max(max(h[1] for h in host), kernels[-1][1])
    busy, end, holes = 0.0, t0, []
    for a, b in kernels:
        if a > end:
            holes.append((end, a))
        busy += max(0.0, b - max(a, end))
        end = max(end, b)
    if t1 > end:
        holes.append((end, t1))
    named = []
    for a, b in sorted(holes, key=lambda h: h[0] - h[1])[:top]:
        if b - a < min_ms * 1e3:
            break
        spans = [(he - hs, name) for hs, he, name in host if hs <= a + 0.1 * (b - a) and he >= b - 0.1 * (b - a)]
        named.append({"at_ms": round((a - t0) / 1e3, 2), "ms": round((b - a) / 1e3, 2),
                      "host": [n for _, n in sorted(spans)[:4]]})
    return {"wall_ms": round((t1 - t0) / 1e3, 1), "kernel_ms": round(busy / 1e3, 1),
            "idle_ms": round((t1 - t0 - busy) / 1e3, 1),
            "holes_over_1ms": sum(1 for a, b in holes if b - a >= 1e3), "largest": named}


def call_state() -> dict[str, int]:
    """Counters a call may move: the allocator's device allocations, frees and retries, dynamo's
    compiled graphs, Triton autotuner entries (the SwiGLU kernel's, keyed by shape class)."""
    state: dict[str, int] = {}
    if torch.cuda.is_available():
        st = torch.cuda.memory_stats()
        for k in ("num_device_alloc", "num_device_free", "num_alloc_retries"):
            state[k] = int(st.get(k, 0))
    from torch._dynamo.utils import counters

    state.update({f"dynamo_{k}": int(v) for k, v in counters["stats"].items()})
    state["dynamo_recompiles"] = int(sum(counters["recompiles"].values())) if "recompiles" in counters else 0
    try:
        from benchcheck.engines.hf.kernels.swiglu_triton import swiglu_tuned

        state["swiglu_tuned"] = len(swiglu_tuned.cache)
    except (ImportError, AttributeError):
        pass
    return state


def state_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def child(mode: str, parts: set[str], tiny: bool, out: Path, profile_calls: bool = False) -> None:
    device = torch.device("cpu" if tiny else "cuda")
    res: dict[str, Any] = {"mode": mode, "env": os.environ.get(RAGGED_ENV)}
    if "sdpa" in parts:
        res["sdpa"] = sdpa_part(mode, device, tiny)
    if "engine" in parts and mode != "flash":
        res["engine"] = engine_part(device, tiny, profile_calls)
    out.write_text(json.dumps(res))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--parts", default="sdpa,engine")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--profile", action="store_true",
                    help="engine part: a new-length call and the same call again under the profiler (device idle)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    if a.child:
        child(a.child, parts, a.tiny, Path(a.child_out), a.profile)
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for mode in a.modes.split(","):
        env = {k: v for k, v in os.environ.items() if k != RAGGED_ENV}
        if mode == "ragged":
            env[RAGGED_ENV] = "1"
        dest = out / f"cudnn_plans_{mode}.json"
        print(f"mode {mode}", flush=True)
        cmd = [sys.executable, "-m", "benchmarks.cudnn_plans", "--child", mode, "--child-out", str(dest),
               "--parts", a.parts] + (["--tiny"] if a.tiny else []) + (["--profile"] if a.profile else [])
        rc = subprocess.run(cmd, env=env).returncode
        results.append(json.loads(dest.read_text()) if rc == 0 and dest.is_file() else {"mode": mode, "rc": rc})
    (out / "cudnn_plans.json").write_text(json.dumps(results, indent=1))
    for r in results:
        for row in r.get("sdpa", []):
            print(f"{r['mode']:7s} {row['kind']:6s} {row['shape']!s:14s} "
                  + (f"first {row['first_ms']:8.1f} again {row['again_ms']:8.2f} build {row['build_ms']:8.1f} ms"
                     if "error" not in row else row["error"]))
        if "engine" in r:
            e = r["engine"]
            print(f"{r['mode']:7s} engine new {e['new_s']} again {e['again_s']} texts {e['texts']}")
    base = next((r for r in results if r.get("mode") == "cudnn" and "sdpa" in r), None)
    for r in results:
        if base is None or r is base or "sdpa" not in r:
            continue
        for a_row, b_row in zip(base["sdpa"], r["sdpa"], strict=False):
            if "sample" in a_row and "sample" in b_row:
                diff = max(abs(x - y) for ra, rb in zip(a_row["sample"], b_row["sample"], strict=True)
                           for x, y in zip(ra, rb, strict=True))
                print(f"{r['mode']:7s} lm {a_row['shape']}: largest difference to cudnn {diff:.3g}")


if __name__ == "__main__":
    main()
