"""Two ``benchcheck pack`` processes on one tarball name: the second stops, the first's tarball is whole."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from benchcheck.store import append_rows

BENCHCHECK = [sys.executable, "-m", "benchcheck"]


def _results(root: Path) -> Path:
    res = root / "results"
    append_rows(res / "step1" / "Bench.jsonl", [{"item_id": f"Bench_{i}", "bench": "Bench", "step": 1,
                                                 "removed": False} for i in range(20)])
    append_rows(res / "run_log.jsonl", [{"step": 1, "gpus": 0, "wall_s": 1.0, "rows_added": 20}])
    # Incompressible bytes, so the first pack is still writing when it is paused below.
    (res / "step1" / "Big.jsonl").write_bytes(os.urandom(8 << 20))
    return res


def test_a_second_pack_on_the_same_name_stops_and_the_first_stays_whole(tmp_path: Path) -> None:
    _results(tmp_path)
    out = tmp_path / "out" / "r.tar.gz"
    cmd = [*BENCHCHECK, "pack", "--results", "results", "--out", str(out)]
    first = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    partial = out.with_name(out.name + ".partial")
    deadline = time.time() + 120
    while not partial.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert first.poll() is None, "the first pack ended before it could be paused"
    os.killpg(first.pid, signal.SIGSTOP)  # mid-write: the second runs to its end meanwhile
    try:
        second = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    _, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 2, second.stderr
    assert "another `benchcheck pack` is writing it" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert out.with_name("r.sha256").read_text() == f"{digest}  r.tar.gz\n"
    with tarfile.open(out) as tf:
        names = tf.getnames()
    assert "results/step1/Bench.jsonl" in names and "r.report.json" in names
    # The lease is the kernel's: once the first has ended, the same command runs again.
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr


def test_leases_and_a_killed_writers_temp_file_stay_out_of_the_tarball(tmp_path: Path) -> None:
    run = [*BENCHCHECK]
    assert subprocess.run([*run, "demo", "items", "--out", "items"], cwd=tmp_path, capture_output=True).returncode == 0
    screened = subprocess.run([*run, "screen", "--step", "1", "--items", "items", "--results", "results",
                               "--engine", "reference", "--no-progress"], cwd=tmp_path, capture_output=True, text=True)
    assert screened.returncode == 0, screened.stderr
    step1 = tmp_path / "results" / "step1"
    assert any((step1 / ".leases").iterdir())  # the screen run's unit leases
    cmd = [*run, "pack", "--results", "results", "--out"]
    clean = subprocess.run([*cmd, "clean.tar.gz"], cwd=tmp_path, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    # What write_atomic leaves when its writer is killed between the temporary file and the rename.
    (step1 / ".run_spec.json.k1ll3d.tmp").write_text('{"config_hash": "')
    killed = subprocess.run([*cmd, "killed.tar.gz"], cwd=tmp_path, capture_output=True, text=True)
    assert killed.returncode == 0, killed.stderr
    names = {}
    for name in ("clean", "killed"):
        with tarfile.open(tmp_path / f"{name}.tar.gz") as tf:
            names[name] = [n for n in tf.getnames() if n.startswith("results/")]
    assert names["clean"] == names["killed"]
    assert "results/step1/run_spec.json" in names["clean"]
    assert not [n for n in names["clean"] if any(part.startswith(".") for part in n.split("/"))]
