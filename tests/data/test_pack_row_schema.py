"""A result row with a ``schema_version`` this benchcheck cannot read (newer, or no version at all)
stopped ``pack`` with ``RowSchemaError`` and left its ``.partial`` behind. The rows go in as they
are (results are data); the report counts what it can read and one note names each such row's file,
line and what is wrong, as it names rows without an item id; the pack finishes with exit 0, as for
every other damaged row. Every other reader still refuses such a row."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.records import RowSchemaError
from benchcheck.store import StepStore


def test_rows_of_an_unreadable_schema_are_named_not_counted_and_the_pack_finishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    step = tmp_path / "results" / "pool" / "step1"
    step.mkdir(parents=True)
    row = {"bench": "B", "step": 1, "model": "m", "removed": False}
    rows = [{**row, "item_id": "B_0"}, {**row, "item_id": "B_1", "schema_version": 2},
            {**row, "item_id": "B_2", "removed": True}, {**row, "item_id": "B_3", "schema_version": "x"},
            {**row, "item_id": None}]
    (step / "B.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    r = CliRunner().invoke(main, ["pack", "--results", "results/pool", "--out", "out/r.tar.gz"])
    assert r.exit_code == 0 and r.exception is None, r.output
    bad = "results/pool/step1/B.jsonl"
    note = ("2 result rows have a schema_version this benchcheck cannot read and are not counted (they are in the "
            f"tarball as written): {bad}:2 (row schema_version 2 is newer than this benchcheck reads (1); upgrade "
            f"benchcheck to read these results), {bad}:4 (schema_version 'x' is not a positive integer)")
    assert f"note: {note}" in r.stderr.splitlines()
    assert f"note: 1 result rows have no item_id (null or missing) and are not counted: {bad}:5" in r.stderr
    rep = json.loads((tmp_path / "out" / "r.report.json").read_text())
    (st,) = rep["stages"]
    assert (st["items_done"], st["removed"], st["error_rows"]) == (2, 1, 0)
    assert note in rep["notes"] and note in (tmp_path / "out" / "r.report.md").read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".leases", "r.report.json", "r.report.md", "r.sha256", "r.tar.gz"]
    with tarfile.open(tmp_path / "out" / "r.tar.gz") as tf:
        packed = tf.extractfile(f"{bad}")
        assert packed is not None and packed.read() == (step / "B.jsonl").read_bytes()

    # Every reader that does not name what it skips still refuses the row.
    with pytest.raises(RowSchemaError, match=r"B\.jsonl \(row 2\): row schema_version 2 is newer"):
        StepStore(step).current_state()
