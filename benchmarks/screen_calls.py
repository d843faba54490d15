"""``benchcheck screen`` by call shape: one step's steady rate and GPU busy for each (items per
engine call, calls in flight), on the pool ``gpu_pool.py`` builds (issue 43: the pool's steps 2
and 3 left the GPU 36 % and 58 % busy at the default shape).

Each run is ``benchcheck screen --step k --chain k --batch-items N --workers W`` in a child on
the first ``--limit`` items of each benchmark (``--chain k``: no earlier step's survivors needed,
so every run of a step reads the same items), its earlier rows removed first; the rate is read off
the rows as they land (``gpu_e2e.watch_screen``). ``--py-spy PATH`` records the first run of each
step with py-spy (``--nonblocking``, 50 samples a second, per thread), so the table's first row
of a step carries that small overhead.

Run (CPU):  PYTHONPATH=src:. python -m benchmarks.screen_calls --tiny --runs 2:16:2,2:16:2:+visual_no_reads --limit 40
Run (H200): PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.screen_calls --out $OUT
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchcheck.screen.engine_args import DEFAULT_CALL_ITEMS, SERIAL_CALLS
from benchcheck.screen.steps import STEPS
from benchmarks.gpu_e2e import watch_screen, write_model
from benchmarks.gpu_pool import BENCHES, pct, write_pool
from benchmarks.shared.py_spy import recorded
from benchmarks.shared.results import default_out, environment, write

# The defaults, then the same with the visual forward's device reads taken out (decision 105).
RUNS = "2:256:2,2:256:2:+visual_no_reads,3:144:2,3:144:2:+visual_no_reads"
LIMITS = "2:448,3:250"  # items a benchmark by step: ~20 s of step 2 and ~40 s of step 3 on the H200


def parse_runs(text: str) -> list[tuple[int, int, int, str]]:
    """``STEP:ITEMS:CALLS[:OPS],...`` as (step, items per call, calls in flight, ops): OPS the
    ``hf`` engine's ops for that run, joined by ``/`` (``+visual_no_reads/-swiglu``; none: the defaults)."""
    runs = []
    for part in text.split(","):
        fields = part.split(":")
        try:
            step, items, calls = (int(x) for x in fields[:3])
        except ValueError:
            step = items = calls = 0
        ops = fields[3] if len(fields) == 4 else ""
        if len(fields) not in (3, 4) or step not in STEPS or items < 1 or calls < 1:
            raise SystemExit(f"--runs: {part!r} is not STEP:ITEMS:CALLS[:OPS] with a step 1-6 and positive counts")
        runs.append((step, items, calls, ops))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny model on the CPU (smoke run)")
    ap.add_argument("--runs", default=RUNS, help="STEP:ITEMS:CALLS[:OPS],... (items per engine call, calls "
                    "in flight, hf ops joined by '/' such as +visual_no_reads)")
    ap.add_argument("--limit", default=LIMITS, help="STEP:N,... items a benchmark per step, or one N for all")
    ap.add_argument("--budget-s", type=float, default=480.0, help="the script's wall time; later runs are skipped")
    ap.add_argument("--py-spy", default=None, help="a py-spy binary: record each step's first run")
    ap.add_argument("--work", default=None, help="pool and models (default: TMPDIR/benchcheck_screen_calls)")
    ap.add_argument("--out", default=default_out())
    args = ap.parse_args()
    t0, cpu0 = time.perf_counter(), time.process_time()
    device = torch.device("cpu" if args.tiny else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("screen_calls needs a CUDA device (or --tiny for the CPU)")
    runs = parse_runs(args.runs)
    limits = ({k: int(args.limit) for k in STEPS} if args.limit.isdigit()
              else {int(k): int(n) for k, n in (p.split(":") for p in args.limit.split(","))})
    missing = sorted({k for k, _, _, _ in runs} - set(limits))
    if missing:
        raise SystemExit(f"--limit: no item count for step {missing[0]}")
    out, work = Path(args.out), Path(args.work or Path(tempfile.gettempdir()) / "benchcheck_screen_calls")
    out.mkdir(parents=True, exist_ok=True)
    tiny_dir = None
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(work / "tiny")
    t = time.perf_counter()
    models = {m: write_model(work, device, tiny_dir, f"qwen3-vl-{m}", f"model-{m}")
              for m in sorted({STEPS[k].model for k, _, _, _ in runs})}
    upto = max(limits[k] for k, _, _, _ in runs)
    items_dir, cache = write_pool(work, upto, upto)
    setup_s = time.perf_counter() - t
    print(f"setup {setup_s:.1f} s: pool of {BENCHES} x {upto} items", flush=True)

    results = work / "results"
    done: list[dict[str, Any]] = []
    spied: set[int] = set()
    for k, n_items, calls, ops in runs:
        left = args.budget_s - (time.perf_counter() - t0) - 10
        if left < 30:
            print(f"step {k} {n_items}x{calls}: skipped, {left:.0f} s of budget left", flush=True)
            continue
        shutil.rmtree(results / f"step{k}", ignore_errors=True)
        cmd = [sys.executable, "-m", "benchcheck", "screen", "--items", str(items_dir), "--step", str(k),
               "--chain", str(k), "--results", str(results), "--engine", "hf", "--model", str(models[STEPS[k].model]),
               "--frames", str(cache), "--device", device.type, "--no-progress", "--limit", str(limits[k]),
               "--batch-items", str(n_items), "--workers", str(calls)]
        cmd += ["--hf-config", "ops=" + ops.replace("/", ",")] if ops else []
        spy = args.py_spy is not None and k not in spied
        if spy:
            spied.add(k)
            cmd = recorded(args.py_spy, out / f"py_spy_step{k}.txt", cmd)
        got = watch_screen(cmd, results / f"step{k}", device, left)
        got.update(step=k, items_per_call=n_items, calls=calls, ops=ops, py_spy=spy,
                   default=(n_items, calls, ops) == (DEFAULT_CALL_ITEMS[k], SERIAL_CALLS, ""))
        done.append(got)
        print(f"step {k} ({STEPS[k].name}) {n_items} items x {calls} calls{' ' + ops if ops else ''}: "
              f"{got['rows']} rows, steady "
              f"{got['steady_items_per_s']:.2f} items/s, busy {pct(got['busy_steady'])}, first row "
              f"{got['first_row_s']:.1f} s, wall {got['wall_s']:.1f} s, exit {got['rc']}", flush=True)
        if got["rc"] != 0:
            print(got["output_tail"], flush=True)

    env = environment(device, wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - cpu0, setup_s=setup_s)
    lines = [f"device: {env['device']}; torch {env['torch']}; {env['date']}; setup {setup_s:.0f} s; "
             f"script wall {env['wall_s']:.0f} s", "",
             "| step | items a call | calls in flight | ops | rows | steady items/s | busy (steady) | busy (all) | "
             "first row s | wall s | exit | note |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|"]
    lines += [f"| {g['step']} {STEPS[g['step']].name} | {g['items_per_call']} | {g['calls']} | {g['ops']} | "
              f"{g['rows']} | "
              f"{g['steady_items_per_s']:.2f} | {pct(g['busy_steady'])} | {pct(g['busy'])} | {g['first_row_s']:.1f} | "
              f"{g['wall_s']:.1f} | {g['rc']}{' budget' if g['timed_out'] else ''} | "
              f"{', '.join(n for n, on in (('default', g['default']), ('py-spy', g['py_spy'])) if on)} |"
              for g in done]
    record = {"env": env, "limits": limits, "runs": [{k: v for k, v in g.items() if k != "output_tail"}
                                                     for g in done]}
    write(out, "screen_calls.json", record, "screen_calls.md", lines)
    if not done or any(g["rc"] != 0 or math.isnan(g["steady_items_per_s"]) for g in done):
        raise SystemExit("screen_calls: a run failed or landed no rows (see above)")


if __name__ == "__main__":
    main()
