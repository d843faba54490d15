"""Typed records, schema_version on read, the one verdict reducer, unit leases."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchcheck.lease import is_held, try_lease
from benchcheck.records import SCHEMA_VERSION, ErrorRow, GenRow, RowSchemaError, ScoreRow, parse_row
from benchcheck.store import StepStore, append_rows, load_state, read_records
from benchcheck.verdicts import StepState


def test_rows_of_every_age_read_as_typed_records(tmp_path: Path) -> None:
    p = tmp_path / "step1" / "B.jsonl"
    append_rows(p, [
        {"item_id": "old", "removed": True, "margin": -0.5},  # no schema_version: rows before versioning
        {"schema_version": 1, "item_id": "s1", "step": 1, "status": "ok", "mean_margin": 0.7, "margin": 9,
         "prompt_tokens": [10, 11, 12, 13], "lp": [[0.0]]},
        {"schema_version": 1, "item_id": "e", "status": "error", "error_kind": "connection", "retry_free": True},
        {"item_id": "g", "text": "B", "parsed": "B", "parse_status": "ok", "correct": True},
        {"no_item": 1},
    ])
    recs = {r.item_id: r for r in read_records(p)}
    assert set(recs) == {"old", "s1", "e", "g"}
    old, s1, e, g = recs["old"], recs["s1"], recs["e"], recs["g"]
    assert isinstance(old, ScoreRow) and old.removed and old.margin == -0.5
    assert isinstance(s1, ScoreRow) and s1.margin == 0.7 and s1.forwards == 4 and s1["lp"] == [[0.0]]
    assert isinstance(e, ErrorRow) and e.retry_free and e.error_kind == "connection"
    assert isinstance(g, GenRow) and g.parsed == "B" and g.correct is True
    assert s1.to_dict()["schema_version"] == SCHEMA_VERSION


def test_a_newer_schema_version_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "step1" / "B.jsonl"
    append_rows(p, [{"item_id": "a"}, {"schema_version": SCHEMA_VERSION + 1, "item_id": "b"}])
    with pytest.raises(RowSchemaError, match=r"B\.jsonl \(row 2\).*newer than this benchcheck reads"):
        load_state(p.parent)
    with pytest.raises(RowSchemaError, match="not a positive integer"):
        parse_row({"item_id": "x", "schema_version": "v2"})
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"item_id": "a", "bench": "B", "question": "q?", "options": ["x", "y"],
                                 "answer": 0}) + "\n")
    r = subprocess.run([sys.executable, "-m", "benchcheck", "screen", "--items", str(items), "--step", "1",
                        "--results", str(tmp_path), "--plan-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "newer than this benchcheck" in r.stderr and "Traceback" not in r.stderr


def test_the_reducer_decides_every_status() -> None:
    s = StepState(expect_hash="h1").add_all([
        {"item_id": "k", "config_hash": "h1"},
        {"item_id": "r", "config_hash": "h1", "removed": True, "margin": -1.0},
        *[{"item_id": "f", "config_hash": "h1", "status": "error"}] * 3,
        *[{"item_id": "free", "config_hash": "h1", "status": "error", "retry_free": True}] * 3,
        {"item_id": "st", "config_hash": "h0"},
        {"item_id": "legacy"},  # no hash: not judged
    ])
    v = {x.item_id: x for x in s.verdicts()}
    assert v["k"].status == "kept" and v["r"].removed and v["r"].margin == -1.0
    assert v["f"].failed and v["f"].counted_errors == 3
    assert v["free"].status == "error" and v["free"].retry_free_errors == 3 and not v["free"].failed
    assert v["st"].stale and not v["st"].done and v["st"].status == "pending"
    assert v["legacy"].done
    assert s.stale_ids() == ["st"] and s.failed_ids() == ["f"]


def test_run_spec_json_sets_the_current_hash(tmp_path: Path) -> None:
    from benchcheck.screen.steps import INTROS, STEPS
    from benchcheck.spec import ModelRef

    store = StepStore(tmp_path / "step1")
    assert store.current_hash() is None
    spec = STEPS[1].run_spec(INTROS["lmms-v1"], ModelRef("m", None))
    store.write_spec(spec)
    assert store.current_hash() == spec.config_hash
    assert json.loads((tmp_path / "step1" / "run_spec.json").read_text())["prompt"]["intro_name"] == "lmms-v1"


HOLDER = """
import sys, time
from benchcheck.lease import try_lease
lease = try_lease(sys.argv[1])
print("held" if lease else "busy", flush=True)
time.sleep(60)
"""


def test_a_lease_is_held_while_its_holder_lives_and_taken_over_when_it_dies(tmp_path: Path) -> None:
    unit = tmp_path / "step1" / "B.jsonl"
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(unit)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        assert is_held(unit) and try_lease(unit) is None
        assert f"pid={p.pid}" in (unit.parent / ".leases" / "B.jsonl.lock").read_text()
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    deadline = time.time() + 10
    while is_held(unit) and time.time() < deadline:
        time.sleep(0.05)
    lease = try_lease(unit)
    assert lease is not None
    with lease:
        assert lease.held
    assert not lease.held and not is_held(unit)
    assert [x.name for x in unit.parent.iterdir()] == [".leases"]  # no row file made, lock files apart
