"""``benchcheck model tiny|random`` and the throughput benchmark's CPU mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli.model import model

ROOT = Path(__file__).resolve().parents[2]


def test_model_tiny_writes_a_loadable_folder(tmp_path: Path) -> None:
    res = CliRunner().invoke(model, ["tiny", "--out", str(tmp_path / "m"), "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert "seed 3" in res.output
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_vl"
    assert {"model.safetensors", "tokenizer.json", "chat_template.jinja", "preprocessor_config.json"} <= {
        p.name for p in (tmp_path / "m").iterdir()
    }


def test_model_random_needs_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = CliRunner().invoke(model, ["random", "--shape", "qwen3-vl-2b"])
    assert res.exit_code == 2
    assert "no CUDA device" in res.output


@pytest.mark.gpu
def test_random_true_shape_scores_on_the_gpu() -> None:
    res = CliRunner().invoke(model, ["random", "--shape", "qwen3-vl-2b"])
    assert res.exit_code == 0, res.output
    assert "B parameters" in res.output


@pytest.mark.slow
def test_benchmark_runs_on_the_tiny_model(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "engine_throughput.py"), "--tiny", "--quick"]
    cmd += ["--only", "blind", "--no-naive", "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, env=env, timeout=900)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert {r["mode"] for r in rows} >= {"engine", "encode", "forward"}
    assert all(r["items_per_s"] > 0 for r in rows)
