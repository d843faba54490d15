"""``benchcheck dedup`` from the command line, feeding ``screen --plan-only --keep``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from benchcheck.cli import main


def test_dedup_then_screen_keep(pool_files: tuple[Path, Path], tmp_path: Path) -> None:
    alpha, beta = pool_files
    with alpha.open("a") as f:
        f.write('{"item_id": "alpha_bad", "question": "", "options": ["x", "y"], "answer": 0}\n')
    out = tmp_path / "step0"
    runner = CliRunner()
    res = runner.invoke(main, ["dedup", "--items", str(alpha), "--items", str(beta), "--out", str(out),
                               "--model", "minilm", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "ITEMS=14 KEPT=8 EXACT=3 NEAR=3 CROSS=3 INVALID_ITEMS=1" in res.output
    assert "encoded=" in res.output and "reused=0" in res.output
    assert (out / "pool_embeddings").is_dir()
    assert len(pq.read_table(out / "step0_kept.parquet")) == 14

    again = runner.invoke(main, ["dedup", "--items", str(alpha.parent), "--out", str(out), "--model", "minilm",
                                 "--threshold", "0.95", "--quiet"])
    assert again.exit_code == 0, again.output
    assert "encoded=0" in again.output

    plan = runner.invoke(main, ["screen", "--items", str(alpha), "--items", str(beta), "--step", "1",
                                "--results", str(tmp_path / "results"), "--plan-only",
                                "--keep", str(out / "step0_kept.parquet")])
    assert plan.exit_code == 0, plan.output
    assert "NOT_KEPT=6" in plan.output.splitlines()
    assert "REMAINING_TOTAL=8" in plan.output.splitlines()


def test_bad_model_is_one_line_error(pool_files: tuple[Path, Path], tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["dedup", "--items", str(pool_files[0]), "--out", str(tmp_path / "o"),
                                    "--model", str(tmp_path / "no_such_model")])
    assert res.exit_code == 2
    assert "error: model folder" in res.output and "does not exist" in res.output
    assert not (tmp_path / "o" / "step0_kept.parquet").exists()


def test_default_model_offline_says_what_to_do(pool_files: tuple[Path, Path], tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-m", "benchcheck", "dedup", "--items", str(pool_files[0]),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot load embedding model 'BAAI/bge-large-en-v1.5@d4aa6901")
    assert "--model minilm" in last
