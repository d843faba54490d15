"""Seeds 000 and 001's launcher knobs (NGPU, WORKERS, PORT0, GPU_UTIL, PY, VLLM, MAX_SEQS; PILOT,
BENCH, CONDS) are the defaults of the matching ``benchcheck launch`` flags; a flag given wins, and
launch_params.txt records the values used and where each came from.

A fake ``vllm`` (named by VLLM) records its arguments and serves the scripted engine on the port
it was given; a fake ``python`` (named by PY) records that the clients ran through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from screen_helpers import LETTER_RULES
from test_screen_launch import free_port_block

from benchcheck.launch.knobs import note

FAKE_VLLM = """#!{python}
import json, os, sys
argv = sys.argv[1:]
with open(os.environ["FAKE_VLLM_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\\n")
val = lambda flag: argv[argv.index(flag) + 1]
os.execv(sys.executable, [sys.executable, "-m", "benchcheck", "serve", "--engine", "scripted", "--rules",
                          os.environ["FAKE_VLLM_RULES"], "--model", val("--served-model-name"), "--port",
                          val("--port"), "--max-batch-size", val("--max-num-seqs")])
"""


def _items(path: Path, benches: tuple[str, ...], n: int) -> Path:
    """One JSONL of ``n`` multiple-choice items per benchmark (no videos)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"item_id": f"{b}_{k}", "bench": b, "question": "What happens?", "answer": 0, "video_id": None,
             "options": ["a red ball", "a blue cube", "a green cone", "a dog"]} for b in benches for k in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _fakes(tmp: Path, rules: list[dict[str, object]]) -> dict[str, str]:
    (tmp / "rules.json").write_text(json.dumps(rules))
    vllm = tmp / "fake-vllm"
    vllm.write_text(FAKE_VLLM.format(python=sys.executable))
    py = tmp / "fake-python"
    py.write_text(f'#!/bin/sh\necho "$@" >> {tmp / "py.log"}\nexec {sys.executable} "$@"\n')
    for f in (vllm, py):
        f.chmod(0o755)
    return {"VLLM": str(vllm), "PY": str(py), "FAKE_VLLM_LOG": str(tmp / "vllm.log"),
            "FAKE_VLLM_RULES": str(tmp / "rules.json"), "CUDA_VISIBLE_DEVICES": "0,1,2"}


def _launch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("STEP", "NGPU", "WORKERS", "PORT0", "GPU_UTIL", "PY",
                                                              "VLLM", "MAX_SEQS", "PILOT", "BENCH", "CONDS")}
    return subprocess.run([sys.executable, "-m", "benchcheck", "launch", *args], capture_output=True, text=True,
                          timeout=300, env={**clean, **env})


def test_the_note_names_values_and_sources() -> None:
    line = note({"gpus": 2, "workers": 7, "python_exe": "/opt/my python"}, {"gpus": "env", "workers": "flag"})
    assert line == "knobs: NGPU=2 (env), WORKERS=7 (flag), PY='/opt/my python' (default)"


def test_step_knobs_from_the_environment_and_a_flag_that_wins(tmp_path: Path) -> None:
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha",), 4)
    port0 = free_port_block(2)
    logs = tmp_path / "logs"
    env = {**_fakes(tmp_path, LETTER_RULES), "STEP": "1", "NGPU": "2", "WORKERS": "3", "PORT0": str(port0),
           "GPU_UTIL": "0.5", "MAX_SEQS": "5"}
    res = _launch(["--items", str(items), "--results", str(tmp_path / "res"), "--logs", str(logs),
                   "--server", "vllm", "--workers", "2", "--server-timeout", "120"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "REMAINING_TOTAL=0" in res.stdout
    calls = [json.loads(x) for x in (tmp_path / "vllm.log").read_text().splitlines()]
    assert len(calls) == 2  # NGPU=2
    for i, argv in enumerate(sorted(calls, key=lambda a: a[a.index("--port") + 1])):
        assert argv[argv.index("--port") + 1] == str(port0 + i)  # PORT0
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.5"  # GPU_UTIL
        assert argv[argv.index("--max-num-seqs") + 1] == "5"  # MAX_SEQS
    jobs = [json.loads((logs / f"client_s1_gpu{i}.job.json").read_text()) for i in range(2)]
    assert all(j["workers"] == 2 for j in jobs)  # --workers 2 wins over WORKERS=3
    assert (tmp_path / "py.log").read_text().count("benchcheck task run") == 2  # PY ran the clients
    params = (logs / "launch_params.txt").read_text()
    assert params.count(env["VLLM"] + " serve") == 2  # VLLM
    header = next(x for x in params.splitlines() if x.startswith("#"))
    for knob in ("STEP=1 (env)", "NGPU=2 (env)", "WORKERS=2 (flag)", f"PORT0={port0} (env)", "GPU_UTIL=0.5 (env)",
                 "MAX_SEQS=5 (env)", f"PY={env['PY']} (env)", f"VLLM={env['VLLM']} (env)"):
        assert knob in header, (knob, header)


def test_sweep_knobs_from_the_environment(tmp_path: Path) -> None:
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha", "Beta"), 3)
    port0 = free_port_block(2)
    logs = tmp_path / "logs"
    (tmp_path / "store" / "normalized").mkdir(parents=True)  # an empty store
    env = {**_fakes(tmp_path, [{"match": "", "reply": "The answer is A."}]), "NGPU": "2", "WORKERS": "2",
           "PORT0": str(port0), "GPU_UTIL": "0.6", "MAX_SEQS": "4", "BENCH": "Alpha", "CONDS": "v_blind",
           "PILOT": "0"}
    res = _launch(["--sweep", "--items", str(items), "--store", str(tmp_path / "store"), "--results",
                   str(tmp_path / "results"), "--logs", str(logs), "--server", "vllm", "--server-timeout", "120"],
                  env)
    assert res.returncode == 0, res.stdout + res.stderr
    calls = [json.loads(x) for x in (tmp_path / "vllm.log").read_text().splitlines()]
    assert sorted(int(a[a.index("--port") + 1]) for a in calls) == [port0, port0 + 1]
    assert all(a[a.index("--gpu-memory-utilization") + 1] == "0.6" and a[a.index("--max-num-seqs") + 1] == "4"
               for a in calls)
    client = next(x for x in (tmp_path / "py.log").read_text().splitlines() if "sweep run" in x).split()
    assert client[client.index("--workers") + 1] == "4"  # WORKERS per GPU x 2 GPUs
    csv = (tmp_path / "results" / "conditions_results.csv").read_text().splitlines()
    rows = [r.split(",") for r in csv[1:]]
    assert len(rows) == 3 and all("Alpha" in r and "v_blind" in r for r in rows)  # BENCH, CONDS
    header = next(x for x in (logs / "launch_params.txt").read_text().splitlines() if x.startswith("#"))
    for knob in ("NGPU=2 (env)", "WORKERS=2 (env)", "GPU_UTIL=0.6 (env)", "MAX_SEQS=4 (env)", "PILOT=0 (env)",
                 "BENCH=Alpha (env)", "CONDS=v_blind (env)"):
        assert knob in header, (knob, header)


def test_a_bad_knob_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha",), 1)
    res = _launch(["--step", "1", "--items", str(items), "--results", str(tmp_path / "res")], {"NGPU": "abc"})
    assert res.returncode == 2 and "NGPU" in res.stderr and "Traceback" not in res.stderr
    # STEP=9 said "error: unknown step 9", naming neither the variable nor the flag
    res = _launch(["--items", str(items), "--results", str(tmp_path / "res"), "--plan-only"], {"STEP": "9"})
    assert res.returncode == 2 and "STEP" in res.stderr and "--step" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    # ... and --sweep ignores a leftover STEP (a step-0 script's), as it always did
    (tmp_path / "normalized").mkdir()  # an empty store
    res = _launch(["--sweep", "--items", str(items), "--store", str(tmp_path), "--results", str(tmp_path / "res"),
                   "--plan-only"], {"STEP": "0"})
    assert res.returncode == 0, res.stdout + res.stderr
    res = _launch(["--items", str(items), "--results", str(tmp_path / "res"), "--plan-only"], {"STEP": "abc"})
    assert res.returncode == 2 and "STEP=abc" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_plan_only_reads_the_port_range_as_a_launch_does(tmp_path: Path) -> None:
    # --plan-only said the plan was fine for ports a real launch then refused
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha",), 1)
    res = _launch(["--step", "1", "--items", str(items), "--results", str(tmp_path / "res"), "--plan-only",
                   "--gpus", "2", "--port0", "65535"], {})
    assert res.returncode == 2 and "--port0 65535 with 2 servers" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
