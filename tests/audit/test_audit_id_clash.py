"""Two benchmarks with the same item ids, each screened alone into one results folder (the items
loader refuses such ids only within one load): the whole-folder reader took the two items of one id
for one (the last row of either), so the audit's tables and the pool's confidences mixed them.
Forwards are now read benchmark by benchmark; the audit reads the benchmarks of its items only, and
refuses one id in two benchmarks it reads in one line; the pool's confidences key by benchmark and id."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path

import pytest
from audit_synth import SimModel, make_items, run_step, write_items

from benchcheck.audit.run import run_audit
from benchcheck.stats.pool import add_confidence
from benchcheck.stats.source import id_clash, read_forwards

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def _folder(tmp_path: Path) -> tuple[Path, list[object]]:
    rng = random.Random(3)
    a = make_items("Alpha", 30, 4, rng)
    b = [dataclasses.replace(it, bench="Beta", item_id=it.item_id) for it in make_items("Alpha", 30, 4, rng)]
    write_items(tmp_path / "items" / "alpha.jsonl", a)
    write_items(tmp_path / "items_b" / "beta.jsonl", b)
    res = tmp_path / "results"
    # Alpha's items easy for the model, Beta's (same ids) hard: their removals differ.
    run_step(res, 1, a, SimModel("m8", noise=0.1), {it.item_id: [3.0 if j == it.answer else 0.0 for j in range(4)]
                                                    for it in a})
    run_step(res, 1, b, SimModel("m8", noise=0.1), {it.item_id: [0.0] * 4 for it in b})
    return res, [*a, *b]


def test_forwards_are_read_benchmark_by_benchmark(tmp_path: Path) -> None:
    res, _ = _folder(tmp_path)
    rows = read_forwards(res)[1]
    assert len(rows) == 60 and {f.bench for f in rows if f.item_id == "Alpha_0"} == {"Alpha", "Beta"}
    why = id_clash({1: rows})
    assert why is not None and "'Alpha_0'" in why and "'Alpha'" in why and "'Beta'" in why


def test_the_audit_refuses_a_folder_where_one_id_is_two_items(tmp_path: Path) -> None:
    """Without the items' benchmarks (the API, every benchmark of the folder), one id in two
    benchmarks is refused in one line; the CLI passes the items' benchmarks (next test), and the
    items loader refuses one id in two of its files."""
    res, _ = _folder(tmp_path)
    with pytest.raises(ValueError, match="is in benchmark 'Alpha' and in 'Beta'"):
        run_audit(res, None, rounds=20)
    assert run_audit(res, None, rounds=20, benches={"Beta"}).steps == [1]


def test_the_pool_confidence_of_an_item_is_its_own_benchmarks(tmp_path: Path) -> None:
    res, _ = _folder(tmp_path)
    removed = [f for f in read_forwards(res)[1] if f.item_id == "Alpha_0"]
    fate = {f.bench: f.removed for f in removed}
    assert fate == {"Alpha": True, "Beta": False}  # the construction: the two items' fates differ
    records = [{"item_id": "Alpha_0", "bench": b, "removed_at": 1 if fate[b] else None} for b in ("Alpha", "Beta")]
    add_confidence(records, res)
    alone = {}
    for b in ("Alpha", "Beta"):  # each benchmark's folder alone: the confidence it should get
        only = tmp_path / f"only_{b}" / "step1"
        only.mkdir(parents=True)
        (only / f"{b}.jsonl").write_bytes((res / "step1" / f"{b}.jsonl").read_bytes())
        rec = [{"item_id": "Alpha_0", "bench": b, "removed_at": 1 if fate[b] else None}]
        add_confidence(rec, only.parent)
        alone[b] = rec[0]["confidence"]
    assert [r["confidence"] for r in records] == [alone["Alpha"], alone["Beta"]]


def test_the_audit_of_one_benchmark_reads_only_its_rows(tmp_path: Path) -> None:
    """``--items`` of one benchmark audits that benchmark, though another one in the same folder
    uses the same ids (it used to be refused as a clash)."""
    res, _ = _folder(tmp_path)
    out = tmp_path / "audit"
    p = subprocess.run([*BIN, "audit", "--results", str(res), "--items", str(tmp_path / "items"), "--out",
                        str(out), "--rounds", "20"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = (out / "audit_items.csv").read_text().splitlines()
    header = lines[0].split(",")
    benches = {row.split(",")[header.index("bench")] for row in lines[1:]}
    assert benches == {"Alpha"} and len(lines) - 1 == 30
