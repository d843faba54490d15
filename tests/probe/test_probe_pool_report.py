"""The probe in the pool, the audit and the report: pool_items.parquet columns, audit.md's
section, the report's probe section and item view (item text escaped, never run)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq
from probe_rows import run_step

from benchcheck.audit.write import probe_section
from benchcheck.items import Item
from benchcheck.probe.pipeline import probe_pool
from benchcheck.probe.run import ProbeConfig
from benchcheck.report.options import ReportOptions
from benchcheck.report.site import build_report
from benchcheck.screen.assemble import assemble
from benchcheck.screen.context import make_context
from benchcheck.stats.pool import PROBE_COLUMNS, add_probe

EVIL = "<script>alert(1)</script>"


def _pool(root: Path) -> tuple[list[Item], Path, set[str]]:
    rng = random.Random(1)
    items, content, wrong = [], {}, set()
    for i in range(30):
        true = rng.randrange(4)
        gold = true if i % 10 else (true + 2) % 4
        if gold != true:
            wrong.add(f"P_{i}")
        opts = tuple(f"thing {chr(97 + j)} {i}" + (" " + EVIL if j == 3 and i == 0 else "") for j in range(4))
        items.append(Item(f"P_{i}", "Pool", f"{EVIL} which thing {i}?", opts, gold, video_id=None))
        content[f"P_{i}"] = [3.0 if j == true else 0.0 for j in range(4)]
    res = root / "results"
    for s in (1, 3, 5, 6):
        run_step(res, s, items, content if s != 1 else {k: [0.0] * 4 for k in content}, seed=s)
    return items, res, wrong


def test_pool_items_audit_and_report_carry_the_probe(tmp_path: Path) -> None:
    items, res, wrong = _pool(tmp_path)
    records: list[dict[str, object]] = [{"item_id": it.item_id} for it in items]
    add_probe(records, res / "probe")  # no probe yet: the columns exist, empty
    assert all(set(PROBE_COLUMNS) <= set(r) and r["probe_p_gold"] is None for r in records)
    run = probe_pool(items, res / "probe", ProbeConfig(permutations=9, ibp=True, min_items=10), None, res)
    assert run.flags is not None and {f.item_id for f in run.flags} == wrong
    ctx = make_context(items, res, (1, 3, 5, 6), None, None)
    assembled = assemble(ctx)
    pool = {r["item_id"]: r for r in pq.read_table(assembled.paths["pool_items"]).to_pylist()}
    assert all(0.0 <= float(r["probe_p_gold"]) <= 1.0 for r in pool.values())  # type: ignore[arg-type]
    assert {i for i, r in pool.items() if r["label_flag"]} == wrong
    assert all(r["label_flag"] is False for i, r in pool.items() if i not in wrong)
    assert all("step 3:" in str(pool[i]["label_flag_evidence"]) for i in wrong)
    section = probe_section(res / "probe")
    assert "## Text-only probe and label-error flags" in section and "### Label-error flags" in section
    built = build_report(ReportOptions(res, tmp_path / "report", items, chain=(1, 3, 5, 6)))
    html = (built.out / "audit.html").read_text()
    assert 'id="probe"' in html and "probe_benchmarks" in html and "label_flags" in html
    assert EVIL not in html
    chunks = "".join(p.read_text() for p in (built.out / "data").rglob("d*.js"))
    assert '"probe":{' in chunks and '"flag":{' in chunks
    assert (built.out / "audit" / "probe" / "label_flags.csv").is_file()
