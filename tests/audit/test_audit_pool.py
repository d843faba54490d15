"""The assembled pool carries a ``confidence`` column from the audit."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq
from audit_synth import SimModel, make_items, run_step

from benchcheck.audit import read_forwards
from benchcheck.screen.assemble import assemble
from benchcheck.screen.context import make_context
from benchcheck.stats.confidence import confidences


def test_pool_confidence_column(tmp_path: Path) -> None:
    rng = random.Random(0)
    items = make_items("Pool", 80, 4, rng)
    content = {it.item_id: [3.0 if (j == it.answer and rng.random() < 0.3) else rng.gauss(0, 0.8)
                            for j in range(4)] for it in items}
    step1 = run_step(tmp_path, 1, items, SimModel("m", noise=0.4), content)
    survivors = [it for it, r in zip(items, step1, strict=True) if not r["removed"]]
    run_step(tmp_path, 4, survivors, SimModel("m", noise=0.4), content)
    assemble(make_context(items, tmp_path, (1, 4), None, None))
    table = pq.read_table(tmp_path / "pool_items.parquet").to_pylist()
    conf = {(c.step, c.item_id): c.confidence for c in confidences(read_forwards(tmp_path))}
    assert len(table) == 80
    for r in table:
        assert r["confidence"] is not None and 0.0 <= r["confidence"] <= 1.0
        if r["removed_at"] is not None:
            assert abs(r["confidence"] - conf[(r["removed_at"], r["item_id"])]) < 1e-4
        else:
            assert abs(r["confidence"] - min(conf[(s, r["item_id"])] for s in (1, 4))) < 1e-4  # type: ignore[type-var]
