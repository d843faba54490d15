"""What ``sweep analyze``'s check of the failures a CSV lacks costs (decision 138): CPU seconds of
``sweep.state.unsynced`` and of ``read_csv`` (what the analysis reads anyway) on a synthetic
results folder, every typed row in the CSV.

    PYTHONPATH=src python -m benchmarks.sweep_unsynced --items 3000 --rounds 3

The folder: the 13 conditions x 2 benchmarks x ``--items`` answers, typed rows and their CSV rows,
each condition with its ``run_spec.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

CONDS = ("v_blind", "v_1", "v_8_s224", "v_32", "v_32_s168", "v_32_s224", "v_32_s336", "v_32_s448", "v_128_s224",
         "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224")


def build(results: Path, n_items: int) -> None:
    from benchcheck.records import gen_row
    from benchcheck.store import append_records
    from benchcheck.sweep.results import SweepPaths, append_csv_fresh
    from benchcheck.sweep.rows import csv_of

    paths = SweepPaths.under(results)
    for k, cond in enumerate(CONDS):
        chash = f"{k:016x}"
        paths.rows_dir(cond).mkdir(parents=True, exist_ok=True)
        (paths.rows_dir(cond) / "run_spec.json").write_text(json.dumps({"config_hash": chash, "model": {"name": "m"}}))
        for bench in ("BenchA", "BenchB"):
            recs = [gen_row({"item_id": f"i{i}", "bench": bench, "step": cond, "condition": cond, "config_hash": chash,
                             "item_hash": "abcdef0123456789", "status": "ok", "text": "The answer is A.",
                             "parsed": "A", "parse_status": "ok", "parse": "answer_phrase", "correct": True,
                             "gold": "A", "video_id": f"v{i % 50}", "n_frames": 32, "width": 398, "height": 224,
                             "prompt_tokens": 3000, "infer_s": 0.5, "decode_s": 0.1, "model": "m",
                             "meta": {"parser": "mc-text-v1"}, "written_at": "2026-12-07T00:00:00Z"})
                    for i in range(n_items)]
            append_records(paths.rows(cond, bench), recs)
            append_csv_fresh(paths.csv, [csv_of(r) for r in recs])


def main() -> None:
    from benchcheck.sweep.results import SweepPaths, read_csv
    from benchcheck.sweep.state import unsynced

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=3000, help="items per benchmark")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        results = Path(d) / "results"
        build(results, a.items)
        paths = SweepPaths.under(results)
        for _ in range(a.rounds):
            t = time.process_time()
            n = len(read_csv(paths.csv))
            read_s = time.process_time() - t
            t = time.process_time()
            u = unsynced(paths)
            check_s = time.process_time() - t
            print(f"rows {n}: read_csv {read_s:.2f} s CPU, unsynced {check_s:.2f} s CPU ({u.failures} failures)")


if __name__ == "__main__":
    main()
