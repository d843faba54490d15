"""``pack`` with result files that are symlinks (issue 40, item 1): a link inside the results tree is
followed (its content goes in under the link's name), a link out of it or a dangling one is refused
with the link named, and the report counts what the tarball holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchcheck.data.pack import PackOptions, pack
from benchcheck.store import append_rows

BENCHCHECK = str(Path(sys.executable).with_name("benchcheck"))


def _rows(n: int, step: int = 1) -> list[dict[str, object]]:
    return [{"item_id": f"B_{i}", "bench": "B", "step": step, "model": "m", "removed": i < 2,
             "host": "h", "latency_s": 0.1} for i in range(n)]


def _tar_rows(tarball: Path, name: str) -> int:
    with tarfile.open(tarball) as tf:
        member = tf.getmember(name)
        assert member.isreg(), f"{name} is not a regular file in the tarball"
        data = tf.extractfile(member)
        assert data is not None
        return sum(1 for line in data.read().splitlines() if line.strip())


def _stages(res_report: Path) -> dict[str, dict[str, object]]:
    return {s["name"]: s for s in json.loads(res_report.read_text())["stages"]}


def test_links_inside_the_results_tree_are_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = tmp_path / "results" / "pool"
    append_rows(res / "kept" / "step1" / "B.jsonl", _rows(30))          # the real files, inside the tree
    append_rows(res / "kept" / "B2.jsonl", _rows(5, step=2))
    os.symlink("kept/step1", res / "step1")                            # a whole step folder linked
    (res / "step2").mkdir()
    os.symlink("../kept/B2.jsonl", res / "step2" / "B.jsonl")          # one step file linked
    out = pack(PackOptions(Path("results/pool"), (), Path("out/r.tar.gz"), "h", "20261203"))
    assert _tar_rows(out.tarball, "results/pool/step1/B.jsonl") == 30
    assert _tar_rows(out.tarball, "results/pool/step2/B.jsonl") == 5
    with tarfile.open(out.tarball) as tf:
        assert not [m.name for m in tf.getmembers() if m.issym() or m.islnk()]
    stages = _stages(out.report_json)
    assert stages["step1"]["items_done"] == 30 and stages["step2"]["items_done"] == 5
    ok = subprocess.run(["sha256sum", "-c", out.sha256_file.name], cwd=out.tarball.parent,
                        capture_output=True, text=True)
    assert ok.returncode == 0


@pytest.mark.parametrize("which", ["step folder", "step file", "dangling"])
def test_a_link_out_of_the_tree_is_refused_naming_it(tmp_path: Path, which: str) -> None:
    res = tmp_path / "results" / "pool"
    scratch = tmp_path / "scratch"
    append_rows(scratch / "step1" / "B.jsonl", _rows(300))
    append_rows(res / "step2" / "A.jsonl", _rows(3, step=2))
    if which == "step folder":
        os.symlink(scratch / "step1", res / "step1")
        link = res / "step1"
    elif which == "step file":
        (res / "step1").mkdir()
        link = res / "step1" / "B.jsonl"
        os.symlink(scratch / "step1" / "B.jsonl", link)
    else:
        (res / "step1").mkdir()
        link = res / "step1" / "B.jsonl"
        os.symlink(tmp_path / "nowhere.jsonl", link)
    out_dir = tmp_path / "out"
    r = subprocess.run([BENCHCHECK, "pack", "--results", str(res), "--out", str(out_dir / "r.tar.gz")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr
    assert str(link) in r.stderr and "symlink" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not out_dir.exists() or not list(out_dir.iterdir())  # nothing half-written


def test_a_link_loop_inside_the_tree_is_refused(tmp_path: Path) -> None:
    res = tmp_path / "results" / "pool"
    append_rows(res / "step1" / "B.jsonl", _rows(3))
    os.symlink("..", res / "step1" / "up")
    with pytest.raises(ValueError, match="loop"):
        pack(PackOptions(res, (), tmp_path / "out" / "r.tar.gz", "h", "20261203"))
