"""``benchcheck probe`` end to end, and its one-line errors."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from probe_rows import write_items

from benchcheck.probe.synth import pattern_items

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BIN, "probe", *args], capture_output=True, text=True, timeout=180)


def test_probe_cli_writes_its_files(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items" / "pool.jsonl",
                        pattern_items("longest", 40, seed=0, bench="Long") + pattern_items("none", 40, seed=0,
                                                                                            bench="Null"))
    out = tmp_path / "out"
    p = _run("--items", str(items), "--out", str(out), "--model", "none", "--permutations", "19")
    assert p.returncode == 0, p.stderr
    assert "BENCHMARKS=2 LEARNABLE=1" in p.stdout and "FLAGGED=n/a" in p.stdout
    rows = {r["bench"]: r for r in csv.DictReader((out / "probe_benchmarks.csv").open())}
    assert rows["Long"]["learnable"] == "True" and rows["Null"]["learnable"] == "False"
    t = pq.read_table(out / "probe_items.parquet").to_pylist()
    assert len(t) == 80 and {"probe_p_gold", "probe_pick", "probe_probs", "fold"} <= set(t[0])
    assert (out / "probe_ibp.csv").is_file() and "# Text-only probe" in (out / "probe.md").read_text()


def test_probe_cli_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "x", "question": "q?"}\n{not json\n')
    p = _run("--items", str(bad), "--out", str(tmp_path / "o"), "--model", "none")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("error:")
    small = write_items(tmp_path / "small.jsonl", pattern_items("none", 8, seed=0, bench="Tiny"))
    p = _run("--items", str(small), "--out", str(tmp_path / "o"), "--model", "none")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "no benchmark has at least 20 items" in p.stderr and "Tiny: 8 items" in p.stderr
    p = _run("--items", str(small), "--out", str(tmp_path / "o"), "--results", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and "no step<k> folders" in p.stderr and "Traceback" not in p.stderr
    p = _run("--items", str(small), "--out", str(tmp_path / "o"), "--model", str(tmp_path / "nomodel"),
             "--min-items", "4")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "nomodel" in p.stderr


def test_probe_cli_too_few_permutations_is_not_called_at_chance(tmp_path: Path) -> None:
    # 9 rounds give p >= 0.1: a plain pattern must not read as "at chance" nor as learnable=False
    items = write_items(tmp_path / "items" / "pool.jsonl", pattern_items("longest", 40, seed=0, bench="Long"))
    out = tmp_path / "out"
    p = _run("--items", str(items), "--out", str(out), "--model", "none", "--permutations", "9", "--no-ibp")
    assert p.returncode == 0, p.stderr
    assert "--permutations 9 cannot call a benchmark learnable" in p.stderr and "19 or more" in p.stderr
    row = next(csv.DictReader((out / "probe_benchmarks.csv").open()))
    assert row["learnable"] == "" and float(row["accuracy"]) > 0.5
    md = (out / "probe.md").read_text()
    assert "at chance for the probe" not in md
    assert "not tested: 9 permutations cannot give p <= 0.05 (the smallest p is 0.1)" in md
    p = _run("--items", str(items), "--out", str(out), "--model", "none", "--permutations", "0", "--no-ibp")
    assert p.returncode == 0 and "not tested (no permutations)" in (out / "probe.md").read_text()
