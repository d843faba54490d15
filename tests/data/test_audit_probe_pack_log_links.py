"""``pack --logs`` where the log folder, or a log in it, is a symlink: the folder was dropped from
the tarball without a word (exit 0, no note), and a link such as ``latest.log -> run3.log`` too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from benchcheck.store import append_rows


def test_symlinked_log_folder_and_links_inside_it_are_packed_masked(tmp_path: Path) -> None:
    res = tmp_path / "results" / "pool"
    append_rows(res / "step1" / "B.jsonl", [{"item_id": "B_0", "bench": "B", "step": 1, "model": "m",
                                             "removed": False, "host": "h", "latency_s": 0.1}])
    real_logs = tmp_path / "scratch" / "logs"
    real_logs.mkdir(parents=True)
    (real_logs / "run3.log").write_text("vllm serve m --api-key sk-abcdefgh12345678XYZ\n")
    (real_logs / "latest.log").symlink_to("run3.log")
    outside = tmp_path / "secret.txt"
    outside.write_text("not a log of this run\n")
    (real_logs / "out.log").symlink_to(outside)
    (real_logs / "gone.log").symlink_to("nowhere.log")
    (tmp_path / "logs").symlink_to(real_logs)  # packed under the path it resolves to, as results are
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    r = subprocess.run([sys.executable, "-m", "benchcheck", "pack", "--results", "results/pool", "--logs", "logs",
                        "--out", "x.tar.gz"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with tarfile.open(tmp_path / "x.tar.gz") as tf:
        names = set(tf.getnames())
        assert {"scratch/logs/run3.log", "scratch/logs/latest.log"} <= names, names
        assert "scratch/logs/out.log" not in names and "scratch/logs/gone.log" not in names
        for name in ("scratch/logs/run3.log", "scratch/logs/latest.log"):
            data = tf.extractfile(name)
            assert data is not None
            assert data.read() == b"vllm serve m --api-key ***\n"
    notes = " ".join(json.loads((tmp_path / "x.report.json").read_text())["notes"])
    assert "scratch/logs/out.log" in notes and "scratch/logs/gone.log" in notes, notes
    assert "scratch/logs/out.log" in r.stderr
