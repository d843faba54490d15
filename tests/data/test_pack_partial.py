"""A pack stopped by an error removes its ``.partial``: the half tarball stayed beside the output,
and a rerun's folder held a file no pack had finished."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

import benchcheck.data.pack as pack_mod
from benchcheck.data.pack import PackOptions, pack


def _results(root: Path) -> Path:
    step = root / "results" / "pool" / "step1"
    step.mkdir(parents=True)
    for bench in ("A", "B", "C"):
        (step / f"{bench}.jsonl").write_text(json.dumps({"item_id": f"{bench}_0", "step": 1}) + "\n")
    return root / "results" / "pool"


def test_a_pack_that_stops_mid_write_leaves_no_partial_and_a_rerun_is_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _results(tmp_path)
    real, calls = pack_mod._add_member, []

    def full_disk(tf: object, m: object) -> None:
        calls.append(m)
        if len(calls) > 2:  # some members are in the .partial already
            raise OSError(errno.ENOSPC, "No space left on device")
        real(tf, m)  # type: ignore[arg-type]

    monkeypatch.setattr(pack_mod, "_add_member", full_disk)
    out = tmp_path / "out" / "r.tar.gz"
    with pytest.raises(OSError, match="No space left"):
        pack(PackOptions(Path("results/pool"), (), out))
    assert sorted(p.name for p in out.parent.iterdir() if not p.name.startswith(".")) == []

    monkeypatch.setattr(pack_mod, "_add_member", real)
    res = pack(PackOptions(Path("results/pool"), (), out))
    assert sorted(p.name for p in out.parent.iterdir() if not p.name.startswith(".")) == [
        "r.report.json", "r.report.md", "r.sha256", "r.tar.gz"]
    assert res.report.stages[0].items_done == 3


def test_a_report_that_fails_leaves_no_partial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _results(tmp_path)

    def broken(*_: object) -> None:
        raise ValueError("results/pool/step1/A.jsonl: unreadable")

    monkeypatch.setattr(pack_mod, "build_report", broken)
    with pytest.raises(ValueError, match="unreadable"):
        pack(PackOptions(Path("results/pool"), (), Path("r.tar.gz")))
    assert not (tmp_path / "r.tar.gz.partial").exists() and not (tmp_path / "r.tar.gz").exists()
