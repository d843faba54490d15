"""Whether a held batch's decode steps can run beside a prefill on a second stream (issue 43, the
128-token row's lead after decision 130).

The sweep's 128-token row is a compute-bound prefill and 127 memory-bound decode steps a batch,
run one after the other on one stream. If the GPU could run the steps of one batch while the next
batch's prefill runs, part of the steps' time would hide under the prefill. Before the engine is
changed for that, this measures how much would hide: the 8B language model (random weights of the
true shapes) prefilling ``--tokens`` tokens ``--prefills`` times (one row, no cache: the
compute-bound part of a sweep prefill) and ``--steps`` replays of the engine's captured decode step
over a ``ReservedCache`` of ``--rows`` rows (``decode_step.reservation``), timed

- each alone;
- together: the steps replayed on a side stream (normal priority, then high priority), enqueued
  first, and the prefills on the current stream; from the start until both are done.

``hidden`` is the share of the steps' time that running together saved: (prefill + steps -
together) / steps; 1 means the steps ran for free, 0 means no overlap at all. Rounds alternate.

Run (GPU): PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.decode_overlap --out $OUT
Run (CPU): PYTHONPATH=src python -m benchmarks.decode_overlap --tiny   (plumbing only: no streams)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.hf.attention.cache import reserved_slots
from benchcheck.engines.hf.engine import HFEngine
from benchmarks.decode_step import reservation, step_for
from benchmarks.gpu_screen import build
from benchmarks.shared.device import device_for, sync
from benchmarks.shared.results import environment, write


def prefill_for(engine: HFEngine, tokens: int) -> Callable[[], None]:
    """One causal forward of the language model over ``tokens`` new tokens of one row, no cache."""
    model = engine.model
    text = model.model.language_model
    dev = engine.device
    hidden = torch.randn(1, tokens, model.config.text_config.hidden_size, dtype=model.lm_head.weight.dtype,
                         device=dev)
    positions = torch.arange(tokens, device=dev).view(1, 1, tokens).expand(4, 1, tokens)

    def run() -> None:
        text(inputs_embeds=hidden, position_ids=positions, use_cache=False)

    return run


def timed_together(prefill: Callable[[], None], prefills: int, step: Callable[[], Any], steps: int,
                   side: torch.cuda.Stream | None) -> float:
    """Seconds from the start until ``steps`` replays (on ``side``, enqueued first) and ``prefills``
    prefills (on the current stream) are all done; ``side`` None: one after the other on one stream."""
    sync()
    t0 = time.perf_counter()
    if side is not None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(steps):
                step()
    else:
        for _ in range(steps):
            step()
    for _ in range(prefills):
        prefill()
    if side is not None:
        torch.cuda.current_stream().wait_stream(side)
    sync()
    return time.perf_counter() - t0


def timed_alone(fn: Callable[[], Any], n: int) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--rows", type=int, default=3, help="rows of the decoding batch")
    ap.add_argument("--slots", type=int, default=54_400, help="reserved slots a row")
    ap.add_argument("--tokens", type=int, default=16_384, help="tokens of one prefill")
    ap.add_argument("--prefills", type=int, default=4, help="prefills run beside the steps")
    ap.add_argument("--steps", type=int, default=127, help="decode steps (one batch's, at 128 new tokens)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    args = ap.parse_args()
    device = device_for(args.tiny, "decode_overlap")
    tiny_dir = None
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    engine = build("qwen3-vl-8b", tiny_dir, device)
    slots = reserved_slots(256 if args.tiny else args.slots)
    tokens, prefills, steps, rounds = (64, 2, 4, 2) if args.tiny else (args.tokens, args.prefills, args.steps,
                                                                      args.rounds)
    cuda = device.type == "cuda"
    ways: dict[str, torch.cuda.Stream | None] = {"one stream": None}
    if cuda:
        ways["side stream"] = torch.cuda.Stream(device=device)
        ways["side stream, high priority"] = torch.cuda.Stream(device=device, priority=-1)
    with torch.inference_mode():
        cache, inputs = reservation(engine, args.rows, slots)
        step = step_for(engine, cache, inputs, ())
        prefill = prefill_for(engine, tokens)
        prefill()
        times: dict[str, list[float]] = {"prefills alone": [], "steps alone": [], **{w: [] for w in ways}}
        for r in range(rounds):
            order = list(times) if r % 2 == 0 else list(reversed(times))
            for name in order:
                if name == "prefills alone":
                    times[name].append(timed_alone(prefill, prefills))
                elif name == "steps alone":
                    times[name].append(timed_alone(step, steps))
                else:
                    times[name].append(timed_together(prefill, prefills, step, steps, ways[name]))
    ms = {name: 1e3 * statistics.median(ts) for name, ts in times.items()}
    alone_p, alone_s = ms["prefills alone"], ms["steps alone"]
    rows_out: dict[str, Any] = {}
    for name, t in ms.items():
        row: dict[str, Any] = {"ms": t, "spread_ms": 1e3 * (max(times[name]) - min(times[name]))}
        if name in ways:
            row["hidden"] = (alone_p + alone_s - t) / alone_s
        rows_out[name] = row
    print(f"rows {args.rows}, {tokens} tokens x {prefills} prefills, {steps} steps: " + "; ".join(
        f"{name} {r['ms']:.1f} ms" + (f" (hidden {100 * r['hidden']:.0f} %)" if "hidden" in r else "")
        for name, r in rows_out.items()), flush=True)
    lines = ["| way | ms | spread ms | steps' time hidden |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {r['ms']:.1f} | {r['spread_ms']:.1f} | "
              + (f"{100 * r['hidden']:.0f} %" if "hidden" in r else "") + " |" for name, r in rows_out.items()]
    env = environment(device, config_hash=engine.config.hash, rows=args.rows, slots=slots, tokens=tokens,
                      prefills=prefills, steps=steps, rounds=rounds)
    write(Path(args.out), "decode_overlap.json", {"env": env, "ways": rows_out}, "decode_overlap.md", lines)


if __name__ == "__main__":
    main()
