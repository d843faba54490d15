"""A probe run killed while it writes its outputs leaves a record every reader rejects: neither a
reader without ``--step0`` (no record would read as a probe without it) nor one with the run's
own ``--step0`` shows outputs part old, part new."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchcheck.probe import outputs
from benchcheck.probe.run import ProbeResult
from benchcheck.step0.probe_stamp import STAMP_FILE, stale_reason, write_stamp

PAIRS = {("Null", "Null_1"), ("Null", "Null_2")}


def test_a_probe_cut_short_is_stale_for_every_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_stamp(tmp_path, (), None)  # an earlier complete run without --step0
    assert stale_reason(tmp_path, None) is None
    real = outputs.write_stamp

    def dies_on_the_final_record(d: Path, pairs: object, source: object, complete: bool = True) -> Path:
        if complete:
            raise KeyboardInterrupt
        return real(d, pairs, source, complete=complete)  # type: ignore[arg-type]

    monkeypatch.setattr(outputs, "write_stamp", dies_on_the_final_record)
    with pytest.raises(KeyboardInterrupt):
        outputs.write_probe(ProbeResult(), tmp_path, step0=PAIRS, step0_source="step0")
    assert (tmp_path / outputs.MD_FILE).is_file()
    for pairs in (None, PAIRS):
        why = stale_reason(tmp_path, pairs)
        assert why is not None and "cut short" in why and "rerun" in why
    monkeypatch.setattr(outputs, "write_stamp", real)
    outputs.write_probe(ProbeResult(), tmp_path, step0=PAIRS, step0_source="step0")
    assert stale_reason(tmp_path, PAIRS) is None
    assert stale_reason(tmp_path, None) is not None


def test_a_record_from_before_the_mark_reads_as_before(tmp_path: Path) -> None:
    write_stamp(tmp_path, PAIRS, "step0")
    stamp = json.loads((tmp_path / STAMP_FILE).read_text())
    del stamp["complete"]
    (tmp_path / STAMP_FILE).write_text(json.dumps(stamp))
    assert stale_reason(tmp_path, PAIRS) is None
    (tmp_path / STAMP_FILE).unlink()  # a folder from before probes kept a record: no --step0
    assert stale_reason(tmp_path, None) is None
    assert stale_reason(tmp_path, PAIRS) is not None
