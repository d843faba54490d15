"""``export`` stopped by a write the system refuses without naming a file (a full disk, a file size
limit) is one line naming the export folder and exit 1, not a Python traceback; the export's
manifest still lists only files an export wrote, so the same command again finishes it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from scripted_pool import cli, screened


@pytest.mark.parametrize("fmt", ["lmms-eval", "parquet"])
def test_a_file_size_limit_is_one_line_naming_the_export_folder(tmp_path: Path, fmt: str) -> None:
    # incompressible text, so that every format's files pass the size limit
    benches = {"Big": [{"item_id": f"Big_{i}", "question": f"Plain question {i} {os.urandom(200).hex()}?",
                        "options": ["a", "b", "c", "d"], "answer": i % 4} for i in range(200)]}
    items, res, _ = screened(tmp_path, benches)
    out = tmp_path / "export"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))

    args = [sys.executable, "-m", "benchcheck", "export", "--results", str(res), "--items", str(items),
            "--format", fmt, "--out", str(out), "--chain", "1"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"error: {out}: File too large (OSError)", r.stderr
    again = cli(*args[3:])  # without the limit: the same command finishes the export
    assert again.returncode == 0, again.stderr
    assert any(p.suffix in (".jsonl", ".parquet") for p in out.rglob("*"))
