"""Where one ``score_sync`` call of the ``hf`` engine loses device time: a per-batch timeline.

The torch profiler distorts what it measures here (its own start-up, per-op overhead on the
launching thread), so this records only a few timestamps per batch, without changing the engine:
when each request's encoding finished (host clock), when each batch's packing started and its
forward returned to the host, and CUDA events at the start and end of each batch's device work.
The table then shows, per batch, how long the device sat idle before it and whether that wait was
for encoded requests or for the launching thread.

Run (GPU):  PYTHONPATH=src python3 benchmarks/pipeline_timeline.py --only blind,video32
Run (CPU):  PYTHONPATH=src python benchmarks/pipeline_timeline.py --tiny
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcheck.engines.base import ScoreRequest
from benchcheck.engines.hf import engine as hf_module
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward import score as hf_forward
from engine_throughput import jpeg
from gpu_screen import build, engine_variant, free, step1, synthetic_items, visual

REQS: dict[HFEngine, list[ScoreRequest]] = {}  # each engine's current workload (variant warm-ups)


class Timeline:
    """Timestamps of one call: host seconds from its start, device milliseconds from its start."""

    def __init__(self, engine: HFEngine) -> None:
        self.engine = engine
        self.cuda = engine.device.type == "cuda"
        self.t0 = 0.0
        self.base: Any = None
        self.encoded: dict[int, float] = {}  # id(EncodedPrompt) -> host time its encoding ended
        self.batches: list[dict[str, Any]] = []
        self.waits: list[tuple[float, float]] = []  # host time spent in PendingTop.wait

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def event(self) -> Any:
        if not self.cuda:
            return None
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    @contextmanager
    def installed(self) -> Iterator[None]:
        eng, tl = self.engine, self
        enc_orig = eng._encode
        saved = {n: getattr(hf_module, n) for n in ("pack", "collate", "score_packed", "score_batch")}
        wait_orig = hf_forward.PendingTop.wait

        def encode(jobs: Any) -> Any:
            out = enc_orig(jobs)
            for r in out:
                prompt = getattr(r, "prompt", None)
                if prompt is not None:
                    tl.encoded[id(prompt)] = tl.now()
            return out

        def builder(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(prompts: Sequence[Any], *a: Any, **k: Any) -> Any:
                ready = max((tl.encoded.get(id(p), 0.0) for p in prompts), default=0.0)
                tl.batches.append({"n": len(prompts), "tokens": int(sum(p.n_tokens for p in prompts)),
                                   "ready": ready, "build": tl.now()})
                return fn(prompts, *a, **k)
            return wrapped

        def collate(prompts: Sequence[Any], *a: Any, **k: Any) -> Any:
            ready = max((tl.encoded.get(id(p), 0.0) for p in prompts), default=0.0)
            tl.batches.append({"n": len(prompts), "tokens": int(sum(p.n_tokens for p in prompts)),
                               "ready": ready, "build": tl.now()})
            return saved["collate"](prompts, *a, **k)

        def scorer(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(*a: Any, **k: Any) -> Any:
                b = tl.batches[-1]
                b["launch"], b["dev_start"] = tl.now(), tl.event()
                out = fn(*a, **k)
                b["returned"], b["dev_end"] = tl.now(), tl.event()
                return out
            return wrapped

        def wait(self: Any) -> Any:
            t = tl.now()
            out = wait_orig(self)
            tl.waits.append((t, tl.now()))
            return out

        eng._encode = encode  # type: ignore[method-assign]
        hf_module.pack = builder(saved["pack"])  # type: ignore[assignment]
        hf_module.collate = collate  # type: ignore[assignment]
        hf_module.score_packed = scorer(saved["score_packed"])  # type: ignore[assignment]
        hf_module.score_batch = scorer(saved["score_batch"])  # type: ignore[assignment]
        hf_forward.PendingTop.wait = wait  # type: ignore[method-assign]
        try:
            yield
        finally:
            del eng._encode
            for n, f in saved.items():
                setattr(hf_module, n, f)
            hf_forward.PendingTop.wait = wait_orig  # type: ignore[method-assign]

    def run(self, reqs: Sequence[ScoreRequest]) -> dict[str, Any]:
        self.encoded.clear()
        self.batches.clear()
        self.waits.clear()
        if self.cuda:
            torch.cuda.synchronize()
        with self.installed():
            self.t0 = time.perf_counter()
            self.base = self.event()
            self.engine.score_sync(reqs)
            wall = self.now()
        if self.cuda:
            torch.cuda.synchronize()
        return self.summary(len(reqs), wall)

    def summary(self, n: int, wall: float) -> dict[str, Any]:
        rows, prev_end, busy = [], 0.0, 0.0
        for k, b in enumerate(self.batches):
            if self.cuda:
                s = self.base.elapsed_time(b["dev_start"]) / 1e3
                e = self.base.elapsed_time(b["dev_end"]) / 1e3
            else:
                s, e = b["launch"], b["returned"]
            start = max(s, prev_end)  # the event fires when the stream reaches it
            rows.append({"batch": k, "n": b["n"], "tokens": b["tokens"], "ready": b["ready"], "build": b["build"],
                         "launch": b["launch"], "returned": b["returned"], "dev_start": start, "dev_end": e,
                         "idle_before": start - prev_end, "device_s": e - start})
            busy += e - start
            prev_end = e
        first_ready = min((b["ready"] for b in self.batches), default=0.0)
        return {"requests": n, "wall_s": wall, "per_s": n / wall, "batches": len(rows),
                "device_span_busy_s": busy, "busy_fraction_upper": busy / wall,
                "first_batch_ready_s": first_ready, "tail_s": wall - prev_end,
                "wait_s": sum(b - a for a, b in self.waits), "rows": rows}


@contextmanager
def variant(engine: HFEngine, v: str) -> Iterator[None]:
    """The engine with one host-side setting changed for a pass: siX (Python's thread switch
    interval X ms), or any of gpu_screen's engine knobs (``engine_variant``: nopace, growN, ...)."""
    if v.startswith("si"):
        chosen = sys.getswitchinterval()
        sys.setswitchinterval(float(v[2:]) / 1e3)
        try:
            yield
        finally:
            sys.setswitchinterval(chosen)
        return
    knob = engine_variant(engine, v)
    if knob is None:
        raise SystemExit(f"unknown variant {v!r}")
    with knob[0]:
        engine.score_sync(REQS[engine])  # warm-up: the variant's new batch shapes
        yield


def print_summary(name: str, s: dict[str, Any]) -> None:
    print(f"\n== {name}: {s['requests']} requests in {s['wall_s']:.3f} s = {s['per_s']:.1f}/s; {s['batches']} batches; "
          f"device busy (between batch events) {s['device_span_busy_s']:.3f} s = {s['busy_fraction_upper']:.1%}; "
          f"tail {s['tail_s'] * 1e3:.0f} ms; host waiting for results {s['wait_s'] * 1e3:.0f} ms", flush=True)
    print("  batch     n  tokens  ready  build launch return  dev_start dev_end  idle_before  device", flush=True)
    for r in s["rows"]:
        print(f"  {r['batch']:5d} {r['n']:5d} {r['tokens']:7d} {r['ready'] * 1e3:6.0f} {r['build'] * 1e3:6.0f} "
              f"{r['launch'] * 1e3:6.0f} {r['returned'] * 1e3:6.0f}  {r['dev_start'] * 1e3:8.0f} "
              f"{r['dev_end'] * 1e3:7.0f}"
              f"  {r['idle_before'] * 1e3:10.1f}  {r['device_s'] * 1e3:6.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny model on the CPU (smoke run)")
    ap.add_argument("--only", default="blind,image1,video32_8b,video32", help="comma-separated workloads")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the item counts")
    ap.add_argument("--variants", default="si0.5,nopace",
                    help="extra passes: siX (Python's thread switch interval X ms), or gpu_screen's engine "
                         "knobs: nopace, paceN, growN, encN, firstN, tokensN, decodeN")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"), help="folder for timeline.json")
    args = ap.parse_args()
    device = torch.device("cpu" if args.tiny else "cuda")
    tiny_dir = None
    scale = args.scale * (0.1 if args.tiny else 1.0)
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    only = set(args.only.split(","))
    frames = [jpeg(s) for s in range(64)]

    def n(x: int) -> int:
        return max(4, int(x * scale))

    workloads: dict[str, tuple[str, Callable[[], list[ScoreRequest]]]] = {
        "blind": ("qwen3-vl-8b", lambda: step1(synthetic_items(n(1024), 50))),
        "image1": ("qwen3-vl-8b", lambda: visual(synthetic_items(n(384), 30, 2), 2, frames, 32)),
        "video32_8b": ("qwen3-vl-8b", lambda: visual(synthetic_items(n(48), 30, 3), 6, frames, 32)),
        "video32": ("qwen3-vl-2b", lambda: visual(synthetic_items(n(96), 30, 4), 3, frames, 32)),
    }
    out: dict[str, Any] = {}
    engine: HFEngine | None = None
    shape = ""
    for name, (model, make) in workloads.items():
        if name not in only:
            continue
        if model != shape:
            free(engine)
            engine, shape = build(model, tiny_dir, device), model
        assert engine is not None
        reqs = make()
        REQS[engine] = reqs
        engine.score_sync(reqs)  # warm-up: compiles, and cuDNN's graphs for these batch shapes
        tl = Timeline(engine)
        for k in (1, 2):
            s = tl.run(reqs)
            print_summary(f"{name} (pass {k})", s)
            out[f"{name}_{k}"] = s
        for v in [v for v in args.variants.split(",") if v]:
            with variant(engine, v):
                s = tl.run(reqs)
            print_summary(f"{name} ({v})", s)
            out[f"{name}_{v}"] = s
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "timeline.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
