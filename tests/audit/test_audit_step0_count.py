"""Every audit counts step 0 as ``audit --step0`` does (``audit.count_step0``): the multiple-choice
items it left out, never an open-format id step 0 removed (no audit reads one), and the audited
items of each benchmark its dedup run never read. The demo's audit is one of them."""

from __future__ import annotations

import random
from pathlib import Path

from audit_synth import SimModel, make_items, run_step

from benchcheck.audit import AuditResult, count_step0
from benchcheck.audit.write import step0_line
from benchcheck.items import Item
from benchcheck.step0.scope import not_deduplicated_note


def _world() -> tuple[list[Item], set[str]]:
    rng = random.Random(0)
    items = [*make_items("Dup", 30, 4, rng), *make_items("Whole", 20, 4, rng),
             Item("Dup_open", "Dup", "Which frame?", tuple(f"frame {i}" for i in range(30)), 3)]
    assert items[-1].format == "open"
    return items, {"Dup_0", "Dup_1", "Dup_open"}


def test_the_count_leaves_open_items_out() -> None:
    items, removed = _world()
    res = AuditResult()
    count_step0(res, items, removed, {"Dup"})
    assert res.step0_removed == 2
    assert res.not_deduplicated == {"Whole": 20}
    count_step0(res, items, None)
    assert res.step0_removed is None and res.not_deduplicated == {}


def test_the_demo_audit_counts_as_the_cli(tmp_path: Path) -> None:
    from benchcheck.demo.run import _audit

    items, removed = _world()
    results = tmp_path / "results"
    mc = [it for it in items if it.format == "mc"]
    content = {it.item_id: [2.0 if j == it.answer else 0.0 for j in range(4)] for it in mc}
    for bench in ("Dup", "Whole"):
        for step in (1, 3):
            run_step(results, step, [it for it in mc if it.bench == bench], SimModel("sim"), content)
    _audit(results, items, tmp_path / "audit", lambda _: None, (1, 3), step0=removed, step0_scope={"Dup"})
    md = (tmp_path / "audit" / "audit.md").read_text()
    assert step0_line(2) in md
    assert not_deduplicated_note({"Whole": 20}) in md
