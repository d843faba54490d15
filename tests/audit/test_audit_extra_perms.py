"""``--extra-perms``: items near the threshold get more permutations as evidence; the protocol's
four still decide, and the audit's confidence uses the extra ones."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from audit_synth import make_items

from benchcheck.audit import read_forwards
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.items import Item
from benchcheck.protocol import permutations_for
from benchcheck.screen.context import make_context
from benchcheck.screen.extra_perms import ExtraPerms
from benchcheck.screen.runner import RunConfig, run_step
from benchcheck.screen.steps import INTROS
from benchcheck.stats.confidence import confidences
from benchcheck.store import read_rows


def _run(results: Path, items: list[Item], engine: HFEngine, extra: ExtraPerms | None,
         step: int = 1) -> list[dict[str, Any]]:
    ctx = make_context(items, results, (step,), None, None)
    cfg = RunConfig(step=step, intro=INTROS["lmms-v1"], workers=1, batch_items=4, progress=False, extra=extra)
    asyncio.run(run_step(ctx, engine, cfg, echo=lambda _: None))
    return sorted(read_rows(results / f"step{step}" / "X.jsonl"), key=lambda r: r["item_id"])


def test_extra_perms_are_recorded_and_never_decide(tmp_path: Path, tiny_model: Path) -> None:
    items = make_items("X", 6, 4, random.Random(0))
    engine = HFEngine(tiny_model, device="cpu", dtype="float32")
    plain = _run(tmp_path / "plain", items, engine, None)
    extra = _run(tmp_path / "extra", items, engine, ExtraPerms(3, band=100.0))  # every item is "near"
    for p, e in zip(plain, extra, strict=True):
        # The extra forwards may share a batch with other requests (timing), so float32 log-probs
        # agree to rounding, not bit for bit; the decision and the permutations are exact.
        assert p["removed"] == e["removed"] and p["perms"] == e["perms"]
        assert all(abs(x - y) < 1e-4 for a, b in zip(p["lp"], e["lp"], strict=True)
                   for x, y in zip(a, b, strict=True))
        assert "extra_perms" not in p
        assert e["extra_n"] == 3 and len(e["extra_lp"]) == 3 and all(len(x) == 4 for x in e["extra_lp"])
        assert e["extra_perms"] == [list(x) for x in permutations_for(e["item_id"], 4, 7)[4:]]
    (c, *_) = [c for c in confidences(read_forwards(tmp_path / "extra")) if c.step == 1]
    assert "+3 extra" in c.method
    # An empty band asks no item (a margin exactly at log 2 aside); at a single-forward step too.
    narrow = _run(tmp_path / "narrow", items, engine, ExtraPerms(2, band=0.0), step=4)
    assert len(narrow) == 6 and not any("extra_perms" in r for r in narrow)
    wide = _run(tmp_path / "wide", items, engine, ExtraPerms(2, band=100.0), step=4)
    assert len(wide) == 6 and all(r["extra_n"] == 2 for r in wide)
    (s4, *_) = [c for c in confidences(read_forwards(tmp_path / "wide")) if c.step == 4]
    assert s4.method == "own extra permutations"
