"""The pool on one GPU, measured (issue 43): ``benchcheck screen`` steps 1-6 over a synthetic pool of
realistic shape, and from it the wall time of the origin's 299,366-item pool on 1 and 8 GPUs.

Pool (in ``--work``, kept for a later call with the same shape): BENCHES benchmark files, half in
the demo's JSONL shape (its short questions, 4 options) and half NExT-QA-like CSVs (5 longer
options), PER_VIDEO questions a video, each video a 32-frame JPEG grid (448 px, q85) in the frame
cache layout; models: random-weight 8B and 2B checkpoints (``--tiny``: the tiny model for both).

Steps: one child ``python -m benchcheck screen --step k`` each, in chain order, with the step's
model (SPEC: 8B for 1, 2, 4, 6; 2B for 3, 5). The funnel: step k reads the first ``limit_k`` items
of each benchmark (``--limit``), limit_k shrinking with the step's planned rate (``--rates``) so
that each step screens about equally long; within its prefix the CLI itself takes the earlier
steps' survivors. Measured per step from the rows as they land (decision 100).

Split over calls (600 s each): ``--steps 1,2,3 --out A``, then ``--steps 4,5,6 --resume-from A``:
the second call reads the first's plan, measurements and rows (``gpu_pool_results.tar.gz``).

Run (CPU):  PYTHONPATH=src python -m benchmarks.gpu_pool --tiny --items 48
Run (H200): PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.gpu_pool --steps 1,2,3 --out $OUT
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import resource
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchcheck.demo.items import _question as demo_question  # the demo items' question shapes
from benchcheck.screen.steps import STEPS, parse_chain
from benchcheck.store import StepStore
from benchmarks.gpu_e2e import N_GRID, watch_screen, write_model
from benchmarks.shared.results import default_out, environment, write
from benchmarks.shared.workloads import jpeg, nextqa_like_csv, write_grid

BENCHES = 6
PER_VIDEO = 3  # the origin: 183,196 items with frames over 67,021 videos
H200_RATES = "135,155,22,540,22,8"  # items/s by step: gpu_screen on the H200 (docs/PERFORMANCE.md)
ORIGIN_ITEMS = 299_366
ORIGIN_WITH_FRAMES = 183_196  # seed 000: the rest name videos not downloaded (k: ids)
# (step 1 removes, each later step removes): seed 000 saw 20-60 % at step 1 on the 300-item
# samples and gives nothing for later steps; "low" assumes they remove nothing (an upper bound).
SCENARIOS = {"low": (0.20, 0.0), "mid": (0.40, 0.10), "high": (0.60, 0.20)}
MARGIN_S = 15.0  # kept back from the budget for the results
RESULTS_TAR = "gpu_pool_results.tar.gz"


def pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.0%}"


def default_items(rates: dict[int, float], screen_s: float) -> int:
    """Items at step 1 so that the six funnel steps screen ``screen_s`` together at ``rates``."""
    per_item = sum(min(rates[j] for j in range(1, k + 1)) / rates[k] for k in STEPS) / rates[1]
    return math.ceil(screen_s / per_item)


def funnel(n_items: int, rates: dict[int, float]) -> dict[int, int]:
    """Per step, the items per benchmark it reads: n_items at step 1, then as many as the slowest
    step so far screens in step 1's time (never more than the step before: nested prefixes)."""
    per_bench = n_items / BENCHES
    return {k: max(1, math.ceil(per_bench * min(rates[j] for j in range(1, k + 1)) / rates[1])) for k in STEPS}


def write_pool(work: Path, per_bench: int, frames_upto: int, seed: int = 0) -> tuple[Path, Path]:
    """Items of every benchmark in ``work/items``; frames for the first ``frames_upto`` of each
    (the visual steps read no further). Kept when ``pool.json`` says the same pool is there."""
    items, cache, marker = work / "items", work / "pool_frames", work / "pool.json"
    shape = {"per_bench": per_bench, "frames_upto": frames_upto, "seed": seed, "benches": BENCHES,
             "per_video": PER_VIDEO}
    had = json.loads(marker.read_text()) if marker.is_file() else {}
    if {**had, "frames_upto": frames_upto} == shape and had["frames_upto"] >= frames_upto:
        return items, cache
    for old in (items, cache, marker):
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    items.mkdir(parents=True)
    shared = [jpeg(seed * 1000 + j) for j in range(64)]
    for b in range(BENCHES):
        vids = [f"{b:02x}{i // PER_VIDEO:014x}" for i in range(per_bench)]
        if b % 2:
            nextqa_like_csv(items / f"NextLike{b}.csv", per_bench, seed + b, vids, 1_000_000 * (b + 1))
        else:
            rng = random.Random(seed + b)
            rows = []
            for i in range(per_bench):
                q, opts, gold = demo_question(rng, i)
                shown = [f"{'ABCD'[j]}. {o}" for j, o in enumerate(opts)] if i % 2 else opts
                rows.append({"item_id": f"DemoLike{b}_{i}", "question": q, "options": shown, "answer": gold,
                             "video_id": vids[i]})
            (items / f"DemoLike{b}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for v in range(0, min(frames_upto, per_bench), PER_VIDEO):
            # Each video its own order of the shared JPEGs and its own middle frame (step 2's): no
            # two videos hold equal grids or middle frames, as in a real pool.
            pick = random.Random(f"{b}|{v}").sample(range(len(shared)), N_GRID)
            grid = [shared[j] for j in pick]
            grid[N_GRID // 2] = jpeg(100_000 + b * per_bench + v)
            write_grid(cache, vids[v], grid)
    marker.write_text(json.dumps(shape))
    return items, cache


def verdicts(results: Path, step: int) -> dict[str, int]:
    store = StepStore(results / f"step{step}")
    counts = {"kept": 0, "removed": 0, "failed": 0, "error": 0, "pending": 0}
    for v in store.state(None, expect_hash=store.current_hash(), compact=True).verdicts():
        counts[v.status] += 1
    return counts


def row_id(line: bytes) -> str | None:
    try:
        return str(json.loads(line)["item_id"])
    except (ValueError, KeyError, TypeError):  # a torn line of a stopped child: readers skip it too
        return None


def pack(results: Path, items_dir: Path, upto: int, path: Path) -> int:
    """The rows a later call needs, as one file (what comes back from a GPU call is a few files of
    at most 16 MiB): every step's run_spec.json and the rows of the first ``upto`` items of each
    benchmark, the prefix that the steps not run yet read. Returns the rows packed."""
    from benchcheck.items import load_items
    from benchcheck.screen.context import make_context

    keep = {i.item_id for i in make_context(load_items([items_dir]).items, results, (1,), None, None, None,
                                            upto).items} if upto else set()
    n = 0
    with tarfile.open(path, "w:gz") as tar:
        for f in sorted(results.rglob("*")):
            if not f.is_file() or ".leases" in f.parts:  # a stopped child's leases would be stale
                continue
            data = f.read_bytes()
            if f.suffix == ".jsonl":
                rows = [ln for ln in data.splitlines(keepends=True) if row_id(ln) in keep]
                n += len(rows)
                data = b"".join(rows)
            info = tarfile.TarInfo(str(f.relative_to(results)))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return n


def resume(source: str | None, results: Path) -> dict[str, Any]:
    """The earlier call's record, its rows unpacked into ``results`` (a fresh run: none, rows cleared)."""
    src = Path(source) if source else None
    rows_there = src is not None and ((src / RESULTS_TAR).is_file() or (src / "results").is_dir())
    if src is not None and not (rows_there and (src / "gpu_pool.json").is_file()):
        raise SystemExit(f"--resume-from {src}: needs gpu_pool.json and {RESULTS_TAR} (or results/) of an earlier call")
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    if src is None:
        return {}
    if (src / RESULTS_TAR).is_file():
        with tarfile.open(src / RESULTS_TAR) as tar:
            tar.extractall(results, filter="data")
    else:
        shutil.copytree(src / "results", results, dirs_exist_ok=True)
    record: dict[str, Any] = json.loads((src / "gpu_pool.json").read_text())
    return record


def project(steps: dict[int, dict[str, Any]], rates: dict[int, float], scenario: str, frames_frac: float,
            gpus: int) -> dict[str, Any]:
    """Items reaching each step of the origin's pool and the wall time on ``gpus`` independent GPUs
    (items split evenly): items / GPUs / steady rate + the step's time to its first row."""
    first, later = SCENARIOS[scenario]
    visual = ORIGIN_ITEMS * frames_frac * (1 - first)
    text_only = ORIGIN_ITEMS * (1 - frames_frac) * (1 - first)
    items, secs = {1: float(ORIGIN_ITEMS)}, {}
    for k in range(2, 7):  # items without frames skip the visual steps: only the others remove them
        items[k] = visual if STEPS[k].visual else visual + text_only
        visual *= 1 - later
        text_only *= 1 if STEPS[k].visual else 1 - later
    for k in STEPS:
        got = steps.get(k, {})
        rate = got.get("steady_items_per_s") or rates[k]
        rate = rates[k] if not rate or math.isnan(rate) else rate
        load = got.get("first_row_s") or 0.0
        secs[k] = items[k] / gpus / rate + (0.0 if math.isnan(load) else load)
    return {"scenario": scenario, "frames_frac": frames_frac, "gpus": gpus, "items": items, "seconds": secs,
            "total_s": sum(secs.values())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny model on the CPU (smoke run)")
    ap.add_argument("--steps", default="1,2,3,4,5,6", help="the steps this call runs, in chain order")
    ap.add_argument("--items", type=int, default=None, help="items at step 1 (default: sized from --rates "
                    "so that the six steps screen --min-screen-s; resumed: the earlier call's)")
    ap.add_argument("--rates", default=H200_RATES, help="planned items/s of steps 1-6 (the funnel's shape)")
    ap.add_argument("--min-screen-s", type=float, default=600.0, help="screening seconds of steps 1-6 together")
    ap.add_argument("--budget-s", type=float, default=540.0, help="this call's wall time; it stops in time")
    ap.add_argument("--load-s", type=float, default=45.0, help="planned seconds from a step's start to its first row")
    ap.add_argument("--resume-from", default=None, help="an earlier call's --out (its plan, numbers, rows)")
    ap.add_argument("--work", default=None, help="pool and checkpoints (default: TMPDIR/benchcheck_gpu_pool)")
    ap.add_argument("--out", default=default_out(), help="folder for gpu_pool.json/.md and the rows' tarball")
    args = ap.parse_args()
    t0, cpu0 = time.perf_counter(), time.process_time()
    device = torch.device("cpu" if args.tiny else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_pool needs a CUDA device (or --tiny for the CPU)")
    out, work = Path(args.out), Path(args.work or Path(tempfile.gettempdir()) / "benchcheck_gpu_pool")
    results = work / "results"
    rates = dict(zip(STEPS, map(float, args.rates.split(",")), strict=True))
    run_steps = parse_chain(args.steps)
    before = resume(args.resume_from, results)
    done: dict[int, dict[str, Any]] = {int(k): v for k, v in before.get("steps", {}).items()}
    if before:  # the earlier call's pool and prefixes: its rows are about those items
        n_items, limits = before["plan"]["items"], {int(k): v for k, v in before["plan"]["limits"].items()}
    else:
        n_items = args.items or default_items(rates, args.min_screen_s)
        limits = funnel(n_items, rates)
    if before:  # a later call makes up what the earlier screened short of --min-screen-s on its last
        # step, the slowest, which may read as far as the step before it read
        short = args.min_screen_s - before["screen_steady_s"] - sum(limits[k] * BENCHES / rates[k] for k in run_steps)
        last = run_steps[-1]
        if short > 0 and last > 1:
            limits[last] = min(limits[last - 1], limits[last] + math.ceil(short * rates[last] / BENCHES))
    print(f"pool: {n_items} items at step 1, per benchmark by step {limits}", flush=True)

    t = time.perf_counter()
    tiny_dir = None
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(work / "tiny")
    models = {m: write_model(work, device, tiny_dir, f"qwen3-vl-{m}", f"model-{m}")
              for m in sorted({STEPS[k].model for k in run_steps})}
    models_s = time.perf_counter() - t
    t = time.perf_counter()
    visual = [limits[k] for k in run_steps if STEPS[k].visual]
    items_dir, cache = write_pool(work, math.ceil(n_items / BENCHES), max(visual, default=0))
    pool_s = time.perf_counter() - t
    print(f"models {models_s:.1f} s, pool {pool_s:.1f} s", flush=True)

    # Fit this call's steps into what is left of the budget: their prefixes shrink together.
    left = args.budget_s - (time.perf_counter() - t0) - MARGIN_S - args.load_s * len(run_steps)
    planned = sum(limits[k] * BENCHES / rates[k] for k in run_steps)
    if planned > left:
        for k in run_steps:
            limits[k] = max(1, int(limits[k] * max(left, 0) / planned))
        print(f"budget: {planned:.0f} s of screening planned, {left:.0f} s left: prefixes cut to {limits}", flush=True)
    for k in sorted(STEPS)[1:]:
        limits[k] = min(limits[k], limits[k - 1])

    for k in run_steps:
        remaining = args.budget_s - (time.perf_counter() - t0) - MARGIN_S
        if remaining < 10:
            print(f"step {k}: skipped, {remaining:.0f} s of budget left", flush=True)
            continue
        model = str(models[STEPS[k].model])
        cmd = [sys.executable, "-m", "benchcheck", "screen", "--items", str(items_dir), "--step", str(k),
               "--results", str(results), "--engine", "hf", "--model", model, "--frames", str(cache),
               "--device", device.type, "--no-progress", "--limit", str(limits[k])]
        print(f"step {k}: {limits[k]} items a benchmark at most, {remaining:.0f} s left", flush=True)
        got = watch_screen(cmd, results / f"step{k}", device, remaining)
        counts = verdicts(results, k)
        got.update(model=STEPS[k].model, limit=limits[k], items_in=sum(counts.values()), **counts)
        done[k] = got
        print(f"step {k} ({STEPS[k].name}, {got['model']}): {got['items_in']} in, {got['kept']} kept, "
              f"{got['removed']} removed, {got['error'] + got['failed']} errors; wall {got['wall_s']:.1f} s, "
              f"first row {got['first_row_s']:.1f} s, steady {got['steady_items_per_s']:.2f} items/s, busy "
              f"{pct(got['busy_steady'])}; exit {got['rc']}{' (stopped: budget)' if got['timed_out'] else ''}",
              flush=True)
        if got["rc"] != 0:
            print(got["output_tail"], flush=True)

    frames_snapshot = ORIGIN_WITH_FRAMES / ORIGIN_ITEMS
    proj = [project(done, rates, s, f, g) for s in SCENARIOS for f in (frames_snapshot, 1.0) for g in (1, 8)]
    screened = sum(s["wall_s"] for s in done.values())
    steady = sum(s["rows"] / s["steady_items_per_s"] for s in done.values()
                 if s["steady_items_per_s"] and not math.isnan(s["steady_items_per_s"]))
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = environment(device, wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - cpu0,
                      cpu_children_s=kids.ru_utime + kids.ru_stime, models_s=models_s, pool_s=pool_s)
    assumptions = [
        f"origin pool {ORIGIN_ITEMS:,} items, {ORIGIN_WITH_FRAMES:,} with frames (seed 000); the visual steps run "
        "only on items with frames (SPEC), the others go on to step 4; rows 'all': every video downloaded",
        "removal (step 1 / each later step): " + ", ".join(f"{s} {a:.0%} / {b:.0%}" for s, (a, b) in SCENARIOS.items())
        + "; step 1's range from the origin's 300-item samples (seed 000), later steps' not published: "
        "'low' removes nothing after step 1 (the slowest case); removal independent of having frames",
        "rates: the steady items/s measured here on random weights (a random model's survivals are not used); "
        "a step not measured: its planned rate (--rates)",
        "per GPU and step a fixed cost: the measured time to the first row (start, model load, compilation, "
        "first engine call); 8 GPUs: independent, items split evenly, no stragglers",
        "items of the demo's and NExT-QA's lengths; the origin's 139 benchmarks include longer questions and "
        "more options: their prompts are longer, the real rates somewhat lower"]
    record = {"env": env, "plan": {"items": n_items, "limits": limits, "rates": rates, "benches": BENCHES,
                                   "per_video": PER_VIDEO},
              "steps": {str(k): v for k, v in sorted(done.items())}, "screen_wall_s": screened,
              "screen_steady_s": steady, "projection": proj, "assumptions": assumptions}
    out.mkdir(parents=True, exist_ok=True)
    record["packed_rows"] = pack(results, items_dir, max((limits[k] for k in STEPS if k not in done), default=0),
                                 out / RESULTS_TAR)
    lines = [f"device: {env['device']}; torch {env['torch']}; {env['date']}; models {models_s:.0f} s, pool "
             f"{pool_s:.0f} s; script wall {env['wall_s']:.0f} s, CPU {env['cpu_s']:.0f} s here + "
             f"{env['cpu_children_s']:.0f} s in the steps", "",
             "| step | model | per bench | items in | kept | removed | errors | wall s | first row s | steady items/s "
             "| busy (steady) | busy (all) | exit |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {k} {STEPS[k].name} | {s['model']} | {s['limit']} | {s['items_in']} | {s['kept']} | {s['removed']} | "
              f"{s['error'] + s['failed']} | {s['wall_s']:.1f} | {s['first_row_s']:.1f} | "
              f"{s['steady_items_per_s']:.2f} | {pct(s['busy_steady'])} | {pct(s['busy'])} | "
              f"{s['rc']}{' budget' if s['timed_out'] else ''} |" for k, s in sorted(done.items())]
    met = "met" if screened >= args.min_screen_s else f"under the {args.min_screen_s:.0f} s asked"
    lines += ["", f"screened {screened:.0f} s through `benchcheck screen` (wall of the steps), {steady:.0f} s of it "
              f"steady: {met}", "", f"Projection to the origin's pool ({ORIGIN_ITEMS:,} items):", "",
              "| removal | frames | GPUs | items at steps 1-6 | minutes by step | total | 8 GPUs < 30 min |",
              "|---|---|---:|---|---|---:|---|"]
    lines += [f"| {p['scenario']} | {'snapshot' if p['frames_frac'] < 1 else 'all'} | {p['gpus']} | "
              f"{' / '.join(f'{v:,.0f}' for v in p['items'].values())} | "
              f"{' / '.join(f'{v / 60:.1f}' for v in p['seconds'].values())} | {p['total_s'] / 3600:.2f} h | "
              f"{'' if p['gpus'] == 1 else 'yes' if p['total_s'] < 1800 else 'no'} |" for p in proj]
    lines += ["", "Assumptions:", *[f"- {a}" for a in assumptions]]
    write(out, "gpu_pool.json", record, "gpu_pool.md", lines)


if __name__ == "__main__":
    main()
