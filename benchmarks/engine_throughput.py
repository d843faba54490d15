"""Throughput of the ``hf`` engine against naive one-item-at-a-time forwards, with MFU.

One call measures everything, side by side:
  blind    8B, text-only prompts of about 150 tokens (screening step 1)
  image1   8B, one 448x256 JPEG frame + question (step 2)
  video32  2B, 32 JPEG frames at 448x256 + question (step 3)
For each: naive = per item, plain transformers forward (full logits, no batching), then the
engine's ``score_sync`` over all items at several batch sizes. Model-FLOPs utilisation is the
model's useful FLOPs per second over a bf16 matrix product timed in the same run (CPU: float32).

FLOPs counted per item (multiply-add = 2): every linear layer of the language model per prompt
token; causal attention 4 * heads * head_dim * L(L+1)/2 per layer; the output layer at the one
scored position; the vision tower's linears per patch (blocks, patch embedding) and per merged
token (mergers); its full attention 4 * hidden * P^2 per image and layer. Padding, the naive
path's extra output-layer rows and anything not needed for the answer do not count.

Run (GPU):  PYTHONPATH=src python benchmarks/engine_throughput.py --out DIR
Run (CPU):  PYTHONPATH=src python benchmarks/engine_throughput.py --tiny
Needs torch, transformers, numpy and Pillow only.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchcheck.engines.base import LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.pixels import patchify
from benchcheck.engines.hf.model.vision import use_grouped_vision_attention

_TEXT = (
    "what does the person in the video do first after the door opens and before the red car "
    "leaves the street near the kitchen while a dog runs towards the ball on the table"
)
WORDS = _TEXT.split()


@dataclass
class Row:
    workload: str
    model: str
    mode: str
    batch: int
    items: int
    seconds: float
    items_per_s: float
    tflops: float
    mfu: float
    prompt_tokens: float


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


def item_flops(cfg: Any, n_tokens: int, grids: list[tuple[int, int, int]]) -> float:
    """Useful model FLOPs of one scoring forward (see the module docstring)."""
    t, v = cfg.text_config, cfg.vision_config
    q, kv = t.num_attention_heads * t.head_dim, t.num_key_value_heads * t.head_dim
    layer = t.hidden_size * (2 * q + 2 * kv) + 3 * t.hidden_size * t.intermediate_size
    flops = 2.0 * layer * t.num_hidden_layers * n_tokens
    flops += 4.0 * q * t.num_hidden_layers * n_tokens * (n_tokens + 1) / 2
    flops += 2.0 * t.hidden_size * t.vocab_size
    m2 = v.spatial_merge_size**2
    for gt, gh, gw in grids:
        p = gt * gh * gw
        block = 4 * v.hidden_size**2 + 2 * v.hidden_size * v.intermediate_size
        embed = v.in_channels * v.temporal_patch_size * v.patch_size**2 * v.hidden_size
        merger = (v.hidden_size * m2) ** 2 + v.hidden_size * m2 * v.out_hidden_size
        flops += 2.0 * (block * v.depth + embed) * p
        flops += 2.0 * merger * (1 + len(v.deepstack_visual_indexes)) * p / m2
        flops += 4.0 * v.hidden_size * p * p * v.depth
    return flops


def jpeg(seed: int, w: int = 448, h: int = 256) -> bytes:
    """A JPEG (q=85) of smooth random content: a real decode and preprocessing cost."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 16, w // 16, 3), dtype=np.uint8)
    im = Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return buf.getvalue()


def prompt(i: int, n_words: int) -> str:
    rng = np.random.default_rng(i)
    q = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), n_words))
    opts = "\n".join(f"{c}. {' '.join(WORDS[j] for j in rng.integers(0, len(WORDS), 4))}" for c in "ABCDE")
    return f"Look at the frames.\n\nQuestion: {q}?\nOptions:\n{opts}\nAnswer with the option letter only."


def requests(n: int, n_images: int, n_words: int, frames: list[bytes]) -> list[ScoreRequest]:
    return [
        ScoreRequest(f"r{i}", prompt(i, n_words), tuple(frames[(i * 7 + k) % len(frames)] for k in range(n_images)))
        for i in range(n)
    ]


def naive(engine: HFEngine, reqs: list[ScoreRequest]) -> None:
    """The plain way: one request at a time, a full forward, log-softmax of the last position."""
    m = engine.model
    for r in reqs:
        e = engine.encoder.encode(r.prompt, r.images, r.assistant_prefix)
        kw: dict[str, Any] = {"input_ids": torch.from_numpy(e.input_ids)[None].to(engine.device)}
        kw["mm_token_type_ids"] = torch.from_numpy(e.mm_token_type_ids)[None].to(engine.device)
        if e.frames:
            kw["pixel_values"] = patchify(e.frames, engine.pixels).to(engine.dtype)
            kw["image_grid_thw"] = torch.from_numpy(e.image_grid_thw).to(engine.device)
        with torch.inference_mode():
            logits = m(**kw).logits
            torch.topk(torch.log_softmax(logits[0, -1].float(), -1), 20).indices.cpu()


def split_costs(engine: HFEngine, reqs: list[ScoreRequest]) -> tuple[Callable[[], object], Callable[[], object]]:
    """The engine's two halves on their own: encoding in its thread pool, and device forwards
    of already encoded, length-sorted batches."""
    from benchcheck.engines.hf.forward.batch import collate
    from benchcheck.engines.hf.forward.score import score_batch
    from benchcheck.engines.hf.schedule.batches import plan_batches

    def encode() -> list[Any]:
        return list(engine._pool.map(lambda r: engine.encoder.encode(r.prompt, r.images, r.assistant_prefix), reqs))

    encoded = encode()

    def forward() -> None:
        for b in plan_batches([e.n_tokens for e in encoded], engine.max_batch_size, engine.max_batch_tokens):
            batch = collate([encoded[i] for i in b], engine.pad_id, engine.pixels, engine.dtype)
            score_batch(engine.model, batch, 20).wait()

    return encode, forward


def profile(name: str, engine: HFEngine, reqs: list[ScoreRequest], out: Path) -> None:
    """Where one engine call spends its time (torch profiler tables, CPU and device)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch_profile(activities=acts) as prof:
        engine.score_sync(reqs)
        sync()
    avg = prof.key_averages()
    key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    text = avg.table(sort_by=key, row_limit=25) + "\n" + avg.table(sort_by="cpu_time_total", row_limit=40)
    (out / f"profile_{name}.txt").write_text(text)


def measure(
    name: str,
    engine: HFEngine,
    reqs: list[ScoreRequest],
    n_naive: int,
    batches: list[int],
    peak: float,
    variants: bool = False,
) -> list[Row]:
    cfg = engine.model.config
    enc = [engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs[: max(8, n_naive)]]
    tokens = float(np.mean([e.n_tokens for e in enc]))
    grids = [tuple(int(x) for x in g) for g in (enc[0].image_grid_thw if enc[0].image_grid_thw is not None else [])]
    per_item = item_flops(cfg, round(tokens), grids)  # type: ignore[arg-type]
    rows: list[Row] = []

    def row(mode: str, batch: int, items: int, fn: Callable[[], object]) -> None:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        dt = time.perf_counter() - t0
        tf = 0.0 if mode == "encode" else per_item * items / dt / 1e12
        rows.append(Row(name, engine.model_name, mode, batch, items, dt, items / dt, tf, tf / peak, tokens))
        r = rows[-1]
        print(f"  {name:8s} {mode:7s} batch {batch:4d}: {r.items_per_s:8.2f} items/s  MFU {r.mfu:6.1%}", flush=True)

    use_grouped_vision_attention(engine.model, enabled=False)  # plain transformers for the naive way
    naive(engine, reqs[:2])  # warm-up
    if n_naive:
        row("naive", 1, n_naive, lambda: naive(engine, reqs[:n_naive]))
    use_grouped_vision_attention(engine.model)
    for b in batches:
        engine.max_batch_size = b
        engine.score_sync(reqs[: min(len(reqs), b)])  # warm-up at this size
        res: list[object] = []

        def call(res: list[object] = res) -> None:
            res.extend(engine.score_sync(reqs))

        row("engine", b, len(reqs), call)
        bad = [x for x in res if not isinstance(x, LetterScores)]
        if bad:
            raise SystemExit(f"{name}: {len(bad)} failed requests, e.g. {bad[0]}")
    if variants:
        best = max(batches, key=lambda b: next(r.items_per_s for r in rows if r.mode == "engine" and r.batch == b))
        engine.max_batch_size = best
        for threads, window in [(2, None), (8, len(reqs)), (2, len(reqs))]:
            engine.set_encode_threads(threads)
            engine.sort_window = window
            res2: list[object] = []

            def call2(res: list[object] = res2) -> None:
                res.extend(engine.score_sync(reqs))

            row(f"engine t{threads} w{window or 2 * best}", best, len(reqs), call2)
        engine.set_encode_threads(8)
        engine.sort_window = None
    encode, forward = split_costs(engine, reqs)
    row("encode", engine.max_batch_size, len(reqs), encode)
    row("forward", engine.max_batch_size, len(reqs), forward)
    return rows


def build(shape: str, tiny_dir: Path | None, device: torch.device) -> HFEngine:
    if tiny_dir is not None:
        return HFEngine(tiny_dir, device=str(device), served_name=f"tiny({shape})")
    from benchcheck.testing.random_weights import build_random_model

    t0 = time.perf_counter()
    built = build_random_model(shape, device=str(device))
    print(f"built {shape}: {built.parameters() / 1e9:.2f} B parameters in {time.perf_counter() - t0:.1f} s", flush=True)
    return HFEngine.from_model(built.model, built.tokenizer, built.preprocessor_config, name=shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny model on the CPU (smoke run)")
    ap.add_argument("--quick", action="store_true", help="fewer items (a first check of a machine)")
    ap.add_argument("--only", default="blind,image1,video32", help="comma-separated workloads")
    ap.add_argument("--variants", action="store_true", help="also try encode threads / sort window variants")
    ap.add_argument("--no-naive", action="store_true", help="skip the naive rows")
    ap.add_argument("--profile", action="store_true", help="also write a torch profile of one call per workload")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"), help="folder for results.json/table.md")
    args = ap.parse_args()
    device = torch.device("cpu" if args.tiny else "cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tiny_dir = None
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    scale = 0.25 if args.quick or args.tiny else 1.0

    def n(x: int) -> int:
        return max(4, int(x * scale))

    def nn(x: int) -> int:
        return 0 if args.no_naive else n(x)

    peak = matmul_peak(device)
    print(f"matmul peak: {peak:.4g} TFLOP/s ({'bf16 8192^3' if device.type == 'cuda' else 'fp32 1024^3'})")
    frames = [jpeg(s) for s in range(64)]
    only = set(args.only.split(","))
    rows: list[Row] = []
    if only & {"blind", "image1"}:
        engine = build("qwen3-vl-8b", tiny_dir, device)
        if "blind" in only:
            reqs = requests(n(1024), 0, 60, frames)
            rows += measure("blind", engine, reqs, nn(64), [32, 64, 128], peak, args.variants)
            if args.profile:
                profile("blind", engine, reqs[:256], out)
        if "image1" in only:
            reqs = requests(n(384), 1, 40, frames)
            rows += measure("image1", engine, reqs, nn(48), [32, 64], peak, args.variants)
            if args.profile:
                profile("image1", engine, reqs[:128], out)
        del engine
        gc.collect()
        torch.cuda.empty_cache() if device.type == "cuda" else None
    if "video32" in only:
        engine = build("qwen3-vl-2b", tiny_dir, device)
        reqs = requests(n(96), 32, 40, frames)
        rows += measure("video32", engine, reqs, nn(12), [8, 16], peak, args.variants)
        if args.profile:
            profile("video32", engine, reqs[:32], out)

    env = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "matmul_peak_tflops": peak,
        "command": " ".join(sys.argv),
    }
    (out / "results.json").write_text(json.dumps({"env": env, "rows": [asdict(r) for r in rows]}, indent=1))
    lines = [
        f"device: {env['device']}; torch {env['torch']}; matmul peak {peak:.4g} TFLOP/s",
        "",
        "| workload | model | mode | batch | items | prompt tokens | items/s | TFLOP/s | MFU |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.workload} | {r.model} | {r.mode} | {r.batch} | {r.items} | {r.prompt_tokens:.0f} | "
        f"{r.items_per_s:.1f} | {r.tflops:.1f} | {r.mfu:.1%} |"
        for r in rows
    ]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
