"""The scripted sweep on the local executor alone (the ``scripted sweep | local`` row of
``benchmarks/ray_executor.py`` without starting Ray): inferences/s and CPU seconds per run.

    PYTHONPATH=src python benchmarks/sweep_local.py --rounds 3 --sweep-items 5

CPU seconds count this process and its finished children (the decoding pool), so a run on a
machine shared with other jobs can still be compared with another.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ray"))

from ray_helpers import run_sweep, sweep_rows, write_sweep_rules


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main() -> None:
    from benchcheck.demo.run import prepare_benchmarks
    from benchcheck.sweep.demo import DEMO_CONDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep-items", type=int, default=5, help="demo items per benchmark")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        bundle = prepare_benchmarks(root / "demo")
        items, store = list(bundle.paths), root / "demo" / "store"
        rules = write_sweep_rules(root / "sweep_rules.json")
        runs = []
        for r in range(a.rounds):
            res = root / f"local_{r}"
            c0, t0 = _cpu(), time.perf_counter()
            run_sweep(items, store, res, "local", conds=DEMO_CONDS, limit=a.sweep_items, rules=rules,
                      decode_workers=None)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            n = sum(1 for x in sweep_rows(res).values()
                    if x["status"] in ("ok", "unparsed") and "reused_from" not in x["meta"])
            runs.append((wall, cpu, n))
            print(f"round {r}: {n} inferences, wall {wall:.2f}s ({n / wall:.1f}/s), cpu {cpu:.2f}s", flush=True)
        wall = statistics.median(w for w, _, _ in runs)
        print(f"median: {runs[0][2] / wall:.1f} inferences/s (wall {wall:.2f}s, "
              f"cpu {statistics.median(c for _, c, _ in runs):.2f}s)")


if __name__ == "__main__":
    main()
