"""One decode step of the sweep's 8B over its reservation, replayed as a CUDA graph, each way the
engine can run it (issue 43, the 128-token row).

The sweep's 128-token row is a 582-frame prefill and 127 decode steps; the steps are most of what
separates it from its limit, and an end-to-end row moves by as much from run to run as one op
changes it. Here the step alone: the 8B language model (random weights of the true shapes) over a
``ReservedCache`` of 54,400 slots a row, 1, 2 and 5 rows (the sweep's decode batches), captured as
the engine captures it (``forward.generate.DecodeStep``) and replayed, in alternating rounds for
every combination of ops ``decode_split`` (the attention as one Triton kernel or as products) and
``graph_fused`` (the norms, q/k norm with rotary and SiLU compiled or plain), and the default with op
``qkv_packed`` off (q, k and v as three products, not one; "products, plain" has it off too: the
engine before all three ops). The limit: the bytes
a step reads (the language model's weights and output layer, every row's keys and values) at the
copy bandwidth measured here. ``--profile``: the default way's replays by kernel category.
``--tunings T,...``: the default way again with the split kernel launched as each
``decode_split.Tuning`` label says (e.g. ``64/4/3+torch``, decision 119's launch), captured so.

Run (GPU): PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.decode_step --out $OUT
Run (CPU): PYTHONPATH=src python -m benchmarks.decode_step --tiny   (plumbing only: eager steps)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.hf.attention.cache import ReservedCache, reserved_slots
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.generate import DecodeGraphs, DecodeStep, _StepInputs, kv_shape
from benchcheck.engines.hf.kernels import decode_split
from benchcheck.engines.hf.model.state import state_of
from benchmarks.gpu_screen import build, decode_step_bytes
from benchmarks.long_prefill import device_profile
from benchmarks.shared.device import copy_bandwidth, device_for, sync
from benchmarks.shared.results import environment, write

PROFILED = 5  # replays a profile covers (--profile)
WAYS = {"kernel, fused": (), "kernel, plain": ("-graph_fused",), "products, fused": ("-decode_split",),
        "products, plain": ("-decode_split", "-graph_fused", "-qkv_packed"),
        "kernel, fused, q/k/v apart": ("-qkv_packed",)}


def reservation(engine: HFEngine, rows: int, slots: int) -> tuple[ReservedCache, _StepInputs]:
    """A decoding ``ReservedCache`` of ``rows`` rows and ``slots`` slots (all but the last 64
    written) and a step's inputs over it."""
    model = engine.model
    dev = engine.device
    cache = ReservedCache(model.config.text_config.num_hidden_layers, slots)
    cache.reserve(rows, kv_shape(model), model.lm_head.weight.dtype, dev)
    written = slots - 64
    cache.filled(written)
    inputs = _StepInputs(ids=torch.full((rows, 1), 100, dtype=torch.long, device=dev),
                         positions=torch.full((4, rows, 1), written, dtype=torch.long, device=dev),
                         slot=torch.full((1,), written, dtype=torch.long, device=dev),
                         mask=torch.zeros((rows, 1, 1, slots), dtype=torch.bool, device=dev))
    inputs.mask[..., :written] = True
    cache.start_decoding(inputs.slot)
    return cache, inputs


def step_for(engine: HFEngine, cache: ReservedCache, inputs: _StepInputs, ops: tuple[str, ...],
             tuning: decode_split.Tuning | None = None) -> DecodeStep:
    """The step over ``cache`` with ``ops`` in force (and the split kernel launched as ``tuning``
    says), captured at its first call on CUDA (what it launches is fixed there; eager elsewhere)."""
    state_of(engine.model).config = engine.config.with_ops(*ops)
    graphs = DecodeGraphs(enabled=True) if engine.device.type == "cuda" else None
    step = DecodeStep(engine.model, cache, inputs, graphs, engine.pacer)  # its event waits off in the capture
    default = decode_split.TUNING
    decode_split.TUNING = tuning or default
    try:
        step()
    finally:
        decode_split.TUNING = default
    return step


def timed(step: DecodeStep, reps: int) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    sync()
    return (time.perf_counter() - t0) / reps


def one_batch(engine: HFEngine, rows: int, slots: int, bandwidth: float, rounds: int, reps: int,
              profiled: bool = False, tunings: tuple[decode_split.Tuning, ...] = ()) -> dict[str, Any]:
    cache, inputs = reservation(engine, rows, slots)
    steps = {name: step_for(engine, cache, inputs, ops) for name, ops in WAYS.items()}
    steps.update({f"kernel [{t.label()}], fused": step_for(engine, cache, inputs, (), t) for t in tunings})
    # Each way's logits against the plain products' (the engine before ops decode_split and graph_fused).
    logits = {name: step().float().clone() for name, step in steps.items()}
    diffs = {name: float((x - logits["products, plain"]).abs().max()) for name, x in logits.items()}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(rounds):
        for name in list(steps) if r % 2 == 0 else list(reversed(steps)):
            times[name].append(timed(steps[name], reps))
    if profiled:
        # The default way's replays by kernel category: where the step's gap to its limit goes.
        first = next(iter(steps))
        row_profile = device_profile(lambda: [steps[first]() for _ in range(PROFILED)])
    read = decode_step_bytes(engine, slots, rows)
    limit_ms = 1e3 * read / bandwidth if bandwidth == bandwidth else float("nan")
    row: dict[str, Any] = {"rows": rows, "slots": slots, "gb_read": read / 1e9, "limit_ms": limit_ms}
    for name, ts in times.items():
        ms = 1e3 * statistics.median(ts)
        row[name] = {"ms": ms, "of_limit": limit_ms / ms, "spread_ms": 1e3 * (max(ts) - min(ts)),
                     "logits_max_diff": diffs[name]}
    if profiled:
        row["profile"] = {first: row_profile, "steps": PROFILED}
        print(f"  {first}, {PROFILED} steps: device {row_profile['device_ms']:.1f} ms, "
              f"{json.dumps({k: round(v, 2) for k, v in row_profile['by_category_ms'].items()})}")
        for t in row_profile["top"][:12]:
            print(f"    {t['ms']:8.3f} ms {t['count']:5d}x [{t['cat']}] {t['kernel'][:100]}")
    print(f"rows {rows}: {read / 1e9:.1f} GB a step, limit {limit_ms:.2f} ms; " + "; ".join(
        f"{name} {row[name]['ms']:.2f} ms ({100 * row[name]['of_limit']:.0f} %, logits {diffs[name]:.1e})"
        for name in times), flush=True)
    steps.clear()
    del cache
    if engine.device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--rows", default="1,2,5")
    ap.add_argument("--slots", type=int, default=54_400, help="reserved slots a row")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=20, help="replays a round")
    ap.add_argument("--profile", action="store_true", help="also a device profile of the default way's replays")
    ap.add_argument("--tunings", default="", help="comma-separated split-kernel launches (decode_split.Tuning "
                    "labels, e.g. 64/4/3+torch) to time the default way at too")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    args = ap.parse_args()
    try:
        tunings = tuple(decode_split.Tuning.parse(t) for t in args.tunings.split(",") if t)
    except ValueError as err:
        raise SystemExit(f"decode_step: {err}") from None
    device = device_for(args.tiny, "decode_step")
    tiny_dir = None
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    bandwidth = copy_bandwidth(device)
    engine = build("qwen3-vl-8b", tiny_dir, device)
    slots = reserved_slots(256 if args.tiny else args.slots)
    with torch.inference_mode():
        batches = [one_batch(engine, int(r), slots, bandwidth, 2 if args.tiny else args.rounds,
                             2 if args.tiny else args.reps, args.profile, tunings) for r in args.rows.split(",")]
    ways = [*WAYS, *(f"kernel [{t.label()}], fused" for t in tunings)]
    lines = ["| rows | GB a step | limit ms | " + " | ".join(ways) + " |", "|---:|---:|---:|" + "---:|" * len(ways)]
    lines += [f"| {b['rows']} | {b['gb_read']:.1f} | {b['limit_ms']:.2f} | " + " | ".join(
        f"{b[w]['ms']:.2f} ({100 * b[w]['of_limit']:.0f} %)" for w in ways) + " |" for b in batches]
    env = environment(device, copy_bandwidth_gbs=bandwidth / 1e9, config_hash=engine.config.hash,
                      decode_tuning=decode_split.TUNING.label())
    write(Path(args.out), "decode_step.json", {"env": env, "batches": batches}, "decode_step.md", lines)

if __name__ == "__main__":
    main()
