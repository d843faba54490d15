"""``benchcheck launch --sweep``: the servers' lines (pure) and a real run on CPU servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_helpers import item, write_items

from benchcheck.launch.sweep_servers import (
    SweepLaunch,
    default_max_seqs,
    sweep_client_argv,
    sweep_server_specs,
)
from benchcheck.sweep.results import read_csv
from benchcheck.video.synth import make_test_video
from loopback import free_port


def _plan(**kw: object) -> SweepLaunch:
    base: dict[str, object] = dict(n_servers=4, gpus=("0", "1", "2", "3"), model="Qwen/Qwen3-VL-8B-Instruct",
                                   served_name="Qwen/Qwen3-VL-8B-Instruct", revision="0c351dd", use_vllm=True,
                                   max_num_seqs=32, sweep_args=("--items", "i", "--results", "r"), logs=Path("logs"))
    base.update(kw)
    return SweepLaunch(**base)  # type: ignore[arg-type]


def test_vllm_servers_use_the_sweep_settings() -> None:
    specs = sweep_server_specs(_plan())
    assert [s.port for s in specs] == [8011, 8012, 8013, 8014]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "1", "2", "3"]
    line = specs[2].line()
    assert "--max-model-len 65536" in line and """--limit-mm-per-prompt '{"image": 1024}'""" in line
    assert "--max-num-seqs 32" in line and "--port 8013" in line and "--revision 0c351dd" in line
    assert default_max_seqs([31.4, 31.4]) == 8 and default_max_seqs([139.8]) == 32 and default_max_seqs([]) == 32


def test_one_client_round_robins_over_every_endpoint_with_six_workers_per_gpu() -> None:
    p = _plan()
    argv = sweep_client_argv(p, sweep_server_specs(p))
    assert argv[argv.index("--workers") + 1] == "24"
    eps = [argv[i + 1] for i, a in enumerate(argv) if a == "--endpoint"]
    assert eps == [f"http://127.0.0.1:{8011 + i}/v1" for i in range(4)]
    assert argv[3:5] == ["sweep", "run"] and argv[-4:] == ["--items", "i", "--results", "r"]


@pytest.mark.slow  # two tiny-model servers on the CPU: ~80 s here
def test_launch_sweep_runs_on_two_cpu_servers(tmp_path: Path, tiny_model: Path) -> None:
    items = write_items(tmp_path / "items", [item("Alpha", k, "nope") for k in range(3)])
    logs = tmp_path / "logs"
    # A store made as users make one (launch refuses a folder that is not one); the items' video
    # is not in it, so v_1 finds no video.
    make_test_video(tmp_path / "raw" / "clip.mp4", 8, preset="ultrafast")
    made = subprocess.run([sys.executable, "-m", "benchcheck", "videos", "normalize", str(tmp_path / "raw"),
                           "--store", str(tmp_path / "store"), "--no-progress"], capture_output=True, text=True)
    assert made.returncode == 0, made.stdout + made.stderr
    argv = [sys.executable, "-m", "benchcheck", "launch", "--sweep", "--gpus", "2", "--server", "benchcheck",
            "--model", str(tiny_model), "--port0", str(free_port()), "--logs", str(logs), "--items", str(items[0]),
            "--store", str(tmp_path / "store"), "--results", str(tmp_path / "results"), "--conds", "v_blind,v_1"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=500)
    assert res.returncode == 0, res.stdout + res.stderr
    params = (logs / "launch_params.txt").read_text()
    assert params.count("--max-model-len 65536") == 2
    rows = read_csv(tmp_path / "results" / "conditions_results.csv")
    assert sorted(r["item_id"] for r in rows) == ["Alpha_0", "Alpha_1", "Alpha_2"]
    assert {r["condition"] for r in rows} == {"v_blind"}
    fails = [json.loads(x) for x in (tmp_path / "data" / "logs" / "failures.jsonl").read_text().splitlines()]
    assert {f["condition"] for f in fails} == {"v_1"} and len(fails) == 3
