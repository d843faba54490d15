"""``benchcheck audit`` end to end on a constructed results folder, and its usage errors."""

from __future__ import annotations

import csv
import random
import re
import subprocess
import sys
from pathlib import Path

from audit_synth import SimModel, make_items, run_step, write_items

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BIN, "audit", *args], capture_output=True, text=True, timeout=120)


def test_audit_cli_writes_tables_and_markdown(tmp_path: Path) -> None:
    rng = random.Random(0)
    items = make_items("Cli", 120, 4, rng) + make_items("Other", 60, 5, rng)
    write_items(tmp_path / "items" / "pool.jsonl", items)
    content = {it.item_id: [2.5 if (j == it.answer and rng.random() < 0.3) else rng.gauss(0, 0.5)
                            for j in range(len(it.options))] for it in items}
    res = tmp_path / "results"
    for bench in ("Cli", "Other"):
        chosen = [it for it in items if it.bench == bench]
        run_step(res, 1, chosen, SimModel("m8", noise=0.3), content)
        run_step(res, 4, chosen, SimModel("m8", prior=[0.6] + [0.4 / (len(chosen[0].options) - 1)] *
                                          (len(chosen[0].options) - 1)), content)
        run_step(tmp_path / "second", 1, chosen, SimModel("m2", noise=0.3, rng=random.Random(9)), content)
    # A foreign row (an item not in the pool) and a torn line are ignored.
    with (res / "step1" / "Cli.jsonl").open("a") as f:
        f.write('{"item_id": "ghost", "bench": "Cli", "step": 1, "lp": [[0, -9]], "perms": [[0, 1]], '
                '"answer": 0}\n{"torn')
    out = tmp_path / "audit"
    p = _run("--results", str(res), "--items", str(tmp_path / "items"), "--out", str(out), "--rounds", "100",
             "--compare", str(tmp_path / "second"))
    assert p.returncode == 0, p.stderr
    assert "REMOVED=" in p.stdout and "NULL_EXPECTED=" in p.stdout
    for name in ("audit.md", "audit_null.csv", "audit_priors.csv", "audit_items.csv", "audit_thresholds.csv",
                 "audit_floor.csv", "audit_profile.csv", "audit_prior_effects.csv", "audit_agreement.csv"):
        assert (out / name).is_file(), name
    nulls = list(csv.DictReader((out / "audit_null.csv").open()))
    assert {(r["bench"], r["step"]) for r in nulls} == {(b, s) for b in ("Cli", "Other") for s in ("1", "4")}
    assert all("margin > log 2" in r["rule"] for r in nulls)
    # Each cell's printed line leads with the conditioned null its verdict reads (step 4 screens
    # items step 1 kept, so the two nulls differ there), the permutation null only named beside it.
    for r in nulls:
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"{r['bench']} step {r['step']}: "))
        shown = re.search(r", null ([0-9.]+)% \[.*\] \(permutation null ([0-9.]+)%\): ", line)
        assert shown is not None, line
        assert abs(float(shown[1]) / 100 - float(r["cond_null_rate"])) <= 6e-4, line
        assert abs(float(shown[2]) / 100 - float(r["null_rate"])) <= 6e-4, line
    rows = list(csv.DictReader((out / "audit_items.csv").open()))
    assert len(rows) == 2 * len(items) and "ghost" not in {r["item_id"] for r in rows}
    md = (out / "audit.md").read_text()
    assert "## Null of the rule" in md and "## Cross-model agreement" in md and "## Shortcut profile" in md


def test_audit_cli_usage_errors(tmp_path: Path) -> None:
    items = write_items(tmp_path / "i.jsonl", make_items("E", 3, 4, random.Random(0)))
    p = _run("--results", str(tmp_path / "none"), "--items", str(items), "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "no step<k> folders" in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "r" / "step1").mkdir(parents=True)
    p = _run("--results", str(tmp_path / "r"), "--items", str(items), "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "no ok rows" in p.stderr and "Traceback" not in p.stderr


def test_audit_cli_rerun_without_options_leaves_no_stale_tables(tmp_path: Path) -> None:
    # the report shows every audit_*.csv of the folder: one from an earlier run's --target-fdr or
    # --compare would be read as this run's
    rng = random.Random(1)
    items = make_items("Re", 60, 4, rng)
    write_items(tmp_path / "items" / "pool.jsonl", items)
    content = {it.item_id: [2.5 if (j == it.answer and rng.random() < 0.3) else rng.gauss(0, 0.5)
                            for j in range(len(it.options))] for it in items}
    run_step(tmp_path / "results", 1, items, SimModel("m8", noise=0.3), content)
    run_step(tmp_path / "second", 1, items, SimModel("m2", noise=0.3, rng=random.Random(9)), content)
    out = tmp_path / "audit"
    base = ("--results", str(tmp_path / "results"), "--items", str(tmp_path / "items"), "--out", str(out),
            "--rounds", "50")
    p = _run(*base, "--target-fdr", "0.1", "--compare", str(tmp_path / "second"))
    assert p.returncode == 0, p.stderr
    optional = ("audit_fdr_target.csv", "audit_agreement.csv", "audit_agreement_both.csv")
    assert all((out / name).is_file() for name in optional)
    p = _run(*base)
    assert p.returncode == 0, p.stderr
    assert not [name for name in optional if (out / name).exists()]
    assert (out / "audit_null.csv").is_file() and (out / "audit_fdr.csv").is_file()
