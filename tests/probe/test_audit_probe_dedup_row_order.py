"""``benchcheck probe`` on one pool written in two row orders: the same files, byte for byte.

The permutation null redraws golds item by item and IBP breaks ties by position, so a probe that
followed file order gave a re-exported file other p-values (0.6 against 0.9 on the same items)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from probe_rows import write_items

from benchcheck.probe.synth import pattern_items

BIN = [str(Path(sys.executable).with_name("benchcheck"))]
FILES = ("probe_benchmarks.csv", "probe_items.parquet", "probe_ibp.csv", "probe.md")


def test_row_order_inside_a_file_changes_no_output(tmp_path: Path) -> None:
    long = pattern_items("longest", 30, seed=3, bench="Long")
    null = pattern_items("none", 30, seed=3, bench="Null")
    outs = []
    for name, rows in (("forward", long + null), ("reversed", long[::-1] + null[::-1])):
        pool = write_items(tmp_path / name / "pool.jsonl", rows)
        out = tmp_path / name / "out"
        p = subprocess.run([*BIN, "probe", "--items", str(pool), "--out", str(out), "--model", "none",
                            "--permutations", "19", "--quiet"], capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        outs.append(out)
    for f in FILES:
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f
