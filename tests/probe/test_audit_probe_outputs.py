"""``benchcheck probe`` rerun into the same folder: what the files say is this run's."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from probe_rows import write_items, wrong_gold_world

from benchcheck.items import Item
from benchcheck.stats.pool import add_probe

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BIN, "probe", *args], capture_output=True, text=True, timeout=180)


def _world(tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """40 items, every eighth with a wrong gold, and steps 1, 3, 5, 6 that see the true answer."""
    res = tmp_path / "results"
    items, wrong = wrong_gold_world(res)
    return write_items(tmp_path / "items" / "flags.jsonl", items), res, wrong


def test_a_rerun_without_flags_leaves_no_old_flags(tmp_path: Path) -> None:
    items, res, wrong = _world(tmp_path)
    out = tmp_path / "probe"
    p = _run("--items", str(items), "--results", str(res), "--out", str(out), "--model", "none",
             "--permutations", "0")
    assert p.returncode == 0, p.stderr
    flagged = {r["item_id"] for r in csv.DictReader((out / "label_flags.csv").open())}
    assert flagged == wrong
    p = _run("--items", str(items), "--out", str(out), "--model", "none", "--permutations", "0", "--no-ibp")
    assert p.returncode == 0, p.stderr
    assert "FLAGGED=n/a" in p.stdout
    # the old flags must not be read as this run's by assemble and the report
    assert not (out / "label_flags.csv").exists()
    records: list[dict[str, object]] = [{"item_id": i} for i in sorted(wrong)]
    add_probe(records, out)
    assert all(r["label_flag"] is None for r in records)
    # no IBP rounds: the file still has its header, so it reads as a table with no rows
    assert (out / "probe_ibp.csv").read_text().splitlines() == [
        "bench,round,items,accuracy,chance,p_above_chance,pruned_next"]


def test_no_flags_says_why(tmp_path: Path) -> None:
    items, res, _ = _world(tmp_path)
    p = _run("--items", str(items), "--results", str(res), "--out", str(tmp_path / "p"), "--model", "none",
             "--permutations", "0", "--no-ibp", "--flag-agree", "5")
    assert p.returncode == 0, p.stderr
    # the results were given and have three flag steps: the line must not ask for --results
    assert "pass --results" not in p.stdout
    assert "4 source(s) (step 3, step 5, step 6, probe), flags need 5 (--flag-agree 5)" in p.stdout
    p = _run("--items", str(items), "--out", str(tmp_path / "q"), "--model", "none", "--permutations", "0",
             "--no-ibp")
    assert p.returncode == 0, p.stderr
    assert "1 source(s) (probe), flags need 2 (--flag-agree 2); pass --results with steps 3, 5 or 6" in p.stdout


def test_a_seed_out_of_range_is_one_line(tmp_path: Path) -> None:
    items, _, _ = _world(tmp_path)
    for seed in ("-1", str(2**32)):
        p = _run("--items", str(items), "--out", str(tmp_path / "p"), "--model", "none", "--permutations", "1",
                 "--seed", seed)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert "--seed" in p.stderr
    p = _run("--items", str(items), "--out", str(tmp_path / "p"), "--model", "none", "--permutations", "1",
             "--no-ibp", "--seed", str(2**32 - 1))
    assert p.returncode == 0, p.stderr


def test_a_flag_margin_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    items, res, _ = _world(tmp_path)
    p = _run("--items", str(items), "--results", str(res), "--out", str(tmp_path / "p"), "--model", "none",
             "--permutations", "0", "--no-ibp", "--flag-margin", "nan")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--flag-margin" in p.stderr, (p.stdout, p.stderr)


def test_a_skipped_benchmark_gets_its_line(tmp_path: Path) -> None:
    items, _, _ = _world(tmp_path)
    write_items(items.parent / "tiny.jsonl", [Item("t0", "Tiny", "Which?", ("a", "b"), 0, video_id="x")])
    p = _run("--items", str(items.parent), "--out", str(tmp_path / "p"), "--model", "none", "--permutations", "0",
             "--no-ibp")
    assert p.returncode == 0, p.stderr
    assert "Tiny: skipped (1 items, fewer than --min-items 20)" in p.stdout.splitlines()
    assert "SKIPPED=1" in p.stdout
