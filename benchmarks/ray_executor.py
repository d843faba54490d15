"""Ray executor overhead: items/s of the local runner against ``--executor ray`` on the same items.

Workloads (each on a fresh results folder, so every item is worked):

- ``scripted step 1``: the demo pool's text-only step with the scripted engine (answers cost
  ~nothing): the pure cost of each executor (planning, request building, rows, the store);
- ``scripted step 3``: the 32-frame step from a frame cache (Ray's CPU actors read the JPEGs and
  build the requests; the engine actor answers);
- ``tiny step 1``: the in-process ``hf`` engine with the tiny random Qwen3-VL (CPU);
- ``scripted sweep``: ``sweep run`` on the ground-truth demo (its 7 conditions, ``--sweep-items``
  per benchmark): frames decoded from the video store (Ray: in the CPU actors), scripted answers;
- ``tiny sweep``: the same with the tiny model on ``v_blind,v_1,v_8_s224`` (generation on CPU).

Ray is started once before timing (its start-up, printed apart, is not in the items/s); each
Ray run includes asking an engine actor for the engine's identity and starting the actor pools.
Executors run interleaved for ``--rounds`` rounds and the median is reported.

    python -m benchmarks.ray_executor --rounds 2 --tiny-items 12 --sweep-items 5 --only all

Sweep items/s counts inferences (CSV rows with an answer; reused rows cost nothing and are left out).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.shared.runs import make_pool, ok_rows, run_step, run_sweep, sweep_rows, write_rules, write_sweep_rules


def timed(items: Path, results: Path, step: int, executor: str, **kw: object) -> tuple[float, int]:
    t0 = time.perf_counter()
    run_step(items, results, step, executor, **kw)  # type: ignore[arg-type]
    return time.perf_counter() - t0, len(ok_rows(results / f"step{step}"))


def timed_sweep(items: list[Path], store: Path, results: Path, executor: str, **kw: object) -> tuple[float, int, str]:
    """Wall seconds, inferences, and the object-store peak the Ray run reported ("-" locally)."""
    t0 = time.perf_counter()
    lines = run_sweep(items, store, results, executor, **kw)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    rows = sweep_rows(results).values()
    peaks = [m.group(1) for x in lines if (m := re.search(r"object store peak (\S+ MiB|unknown)", x))]
    n = sum(1 for r in rows if r["status"] in ("ok", "unparsed") and "reused_from" not in r["meta"])
    return wall, n, peaks[-1] if peaks else "-"


def sweep_table(a: argparse.Namespace, root: Path, tiny: Path) -> None:
    from benchcheck.demo.run import prepare_benchmarks
    from benchcheck.sweep.demo import DEMO_CONDS

    bundle = prepare_benchmarks(root / "demo")
    items, store = list(bundle.paths), root / "demo" / "store"
    rules = write_sweep_rules(root / "sweep_rules.json")
    work: dict[str, dict[str, object]] = {
        "scripted sweep": {"conds": DEMO_CONDS, "limit": a.sweep_items, "rules": rules},
        "tiny sweep": {"conds": "v_blind,v_1,v_8_s224", "limit": max(1, a.sweep_items // 2), "engine": "hf",
                       "model": str(tiny)},
    }
    for name, kw in work.items():
        res: dict[str, list[tuple[float, int, str]]] = {"local": [], "ray": []}
        for r in range(a.rounds):
            for ex in ("local", "ray"):
                # The local runner with its default decoding pool (cores - 1 processes), as the CLI runs it.
                res[ex].append(timed_sweep(items, store, root / f"{name.replace(' ', '_')}_{ex}_{r}", ex,
                                           decode_workers=None, **kw))
        for ex, runs in res.items():
            wall = statistics.median(w for w, _, _ in runs)
            n = runs[0][1]
            print(f"| {name} | {ex} | {n} | {wall:.1f} | {n / wall:.1f} | {runs[-1][2]} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tiny-items", type=int, default=12, help="items per benchmark for the tiny model")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--sweep-items", type=int, default=5, help="demo items per benchmark for the sweep")
    ap.add_argument("--only", choices=("screen", "sweep", "all"), default="all")
    a = ap.parse_args()
    import ray
    from benchcheck.testing import build_tiny_model

    root = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    items, frames = make_pool(root)
    rules = write_rules(root / "rules.json")
    tiny = build_tiny_model(root / "tiny", seed=0)
    t0 = time.perf_counter()
    ray.init(num_cpus=a.cpus, resources={"engine_slot": 1}, log_to_driver=False)
    print(f"ray.init: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    work = {
        "scripted step 1": [(1, {"rules": rules})],
        "scripted step 3": [(1, {"rules": rules}), (2, {"rules": rules, "frames": frames}),
                            (3, {"rules": rules, "frames": frames})],
        "tiny step 1": [(1, {"engine": "hf", "model": tiny, "limit": a.tiny_items})],
    }
    print("| workload | executor | items | wall s | items/s |\n|---|---|---|---|---|")
    for name, steps in (work.items() if a.only != "sweep" else ()):
        res: dict[str, list[tuple[float, int]]] = {"local": [], "ray": []}
        for r in range(a.rounds):
            for ex in ("local", "ray"):
                out = root / f"{name.replace(' ', '_')}_{ex}_{r}"
                for step, kw in steps[:-1]:  # earlier steps of the chain: not timed
                    run_step(items, out, step, "local", **kw)
                step, kw = steps[-1]
                res[ex].append(timed(items, out, step, ex, **kw))
        for ex, runs in res.items():
            wall = statistics.median(w for w, _ in runs)
            n = runs[0][1]
            print(f"| {name} | {ex} | {n} | {wall:.1f} | {n / wall:.1f} |")
    if a.only != "screen":
        print("\n| sweep workload | executor | inferences | wall s | inferences/s | object store peak |\n"
              "|---|---|---|---|---|---|")
        sweep_table(a, root, tiny)
    ray.shutdown()


if __name__ == "__main__":
    main()
