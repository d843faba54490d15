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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    cmd = [sys.executable, "-m", "benchmarks.engine_throughput", "--tiny", "--quick"]
    cmd += ["--only", "blind", "--no-naive", "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, env=env, timeout=900, cwd=ROOT)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert {r["mode"] for r in rows} >= {"engine", "encode", "forward"}
    assert all(r["items_per_s"] > 0 for r in rows)


@pytest.mark.parametrize("damage,expected", [
    ("empty", "not a checkpoint folder (no config.json in it)"),
    ("no-weights", "not a checkpoint folder (no *.safetensors or pytorch_model.bin weights in it)"),
    ("torn-weights", "cannot load a Qwen3-VL checkpoint from it (SafetensorError: "),
    ("torn-config", "cannot load a Qwen3-VL checkpoint from it (OSError: "),
    ("missing", "no such folder"),
    ("a-file", "a file, not a checkpoint folder"),
])
def test_screen_with_a_folder_that_is_no_checkpoint_says_so_in_one_line(tiny_model: Path, tmp_path: Path,
                                                                         damage: str, expected: str) -> None:
    """A mistyped or damaged ``--model`` folder: exit 2 and one line naming it, never a traceback."""
    import shutil

    from benchcheck.cli import main

    folder = tmp_path / "model"
    if damage == "empty":
        folder.mkdir()
    elif damage == "a-file":
        folder.write_text("weights?")
    elif damage != "missing":
        shutil.copytree(tiny_model, folder)
        weights = folder / "model.safetensors"
        if damage == "no-weights":
            weights.unlink()
        elif damage == "torn-weights":
            weights.write_bytes(weights.read_bytes()[:5])
        else:
            (folder / "config.json").write_text('{"model_type": "qwen3_vl"')
    items = tmp_path / "items.jsonl"
    items.write_text('{"item_id": "a", "question": "q", "options": ["x", "y"], "answer": 0}\n')
    res = CliRunner().invoke(main, ["screen", "--items", str(items), "--step", "1", "--engine", "hf", "--model",
                                    str(folder), "--results", str(tmp_path / "r"), "--device", "cpu"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("error:"))
    assert line.startswith(f"error: --model {folder}: ") and expected in line, line


def test_screen_with_a_hub_model_that_cannot_be_had_says_so_in_one_line(tmp_path: Path) -> None:
    """An offline node and a hub id not in the cache: exit 2, one line saying what to pass instead."""
    items = tmp_path / "items.jsonl"
    items.write_text('{"item_id": "a", "question": "q", "options": ["x", "y"], "answer": 0}\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    cmd = [sys.executable, "-m", "benchcheck", "screen", "--items", str(items), "--step", "1", "--engine", "hf",
           "--model", "nobody/no-such-model", "--revision", "0" * 40, "--results", str(tmp_path / "r"),
           "--device", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    [line] = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: cannot get model 'nobody/no-such-model' at revision 0000") and \
        line.endswith("pass --model DIR (a local checkpoint folder) to run without the hub")
