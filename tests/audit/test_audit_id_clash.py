"""Two benchmarks with the same item ids, each screened alone into one results folder (the items
loader refuses such ids only within one load): the whole-folder reader took the two items of one id
for one (the last row of either), so the audit's tables and the pool's confidences mixed them.
Forwards are now read benchmark by benchmark; the audit, which keys items by id, refuses such a
folder in one line, and the pool's confidences key by benchmark and id."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path

from audit_synth import SimModel, make_items, run_step, write_items

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
    res, _ = _folder(tmp_path)
    p = subprocess.run([*BIN, "audit", "--results", str(res), "--items", str(tmp_path / "items"), "--out",
                        str(tmp_path / "audit"), "--rounds", "20"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "is in benchmark 'Alpha' and in 'Beta'" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "audit").exists()


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
