"""`launch --port0 auto`: each server gets a free port of its own, so launches on one host never collide.

A `slurm script` task ran `launch --port0 $((8001 + G * (k % array)))`: two arrays (a step-1 and a
step-2 array, or two users') whose tasks met on a node both started at 8001, and the second
launch refused the port (or its server could not bind it) and failed; a large array's ports
reached the ephemeral range, where an outgoing connection holding one failed a task at random.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from screen_helpers import LETTER_RULES, cli, ok_rows, popen
from test_launch_knobs import _fakes, _items, _launch

from benchcheck.launch.servers import AUTO_PORT, ServerSpec, logged_port, start, stop, wait_healthy
from benchcheck.launch.slurm import SlurmJob, render_sbatch


@pytest.fixture()
def small_pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0
    return tmp_path / "items"


def task_port0(job: SlurmJob, task: int) -> str:
    """The ``--port0`` that task ``task`` of the script passes to launch, as bash evaluates it."""
    expr = re.search(r"--port0 (\S+(?: \S+)*?) --items", render_sbatch(job))
    assert expr, render_sbatch(job)
    out = subprocess.run(["bash", "-c", f"SLURM_ARRAY_TASK_ID={task}; echo {expr.group(1)}"], capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0]


def recorded_ports(logs: Path) -> list[int]:
    header = next(x for x in (logs / "launch_params.txt").read_text().splitlines() if x.startswith("#"))
    m = re.search(r"; ports ([\d ]+)$", header)
    assert m, header
    return [int(p) for p in m.group(1).split()]


def test_tasks_of_two_arrays_on_one_node_both_finish(small_pool: Path, tmp_path: Path, tiny_model: Path) -> None:
    """Task 0 of two arrays (one of two GPUs a task, one of one) on the same node at once, CPU
    servers on loopback: both finish with every item once, on ports no other server had."""
    args = ("--items", str(small_pool), "--results", "r")
    launches = []
    for name, gpus in (("a", 2), ("b", 1)):
        port0 = task_port0(SlurmJob(1, 4, gpus, args), 0)
        logs = tmp_path / f"logs_{name}"
        launches.append((popen("launch", "--step", "1", "--gpus", str(gpus), "--port0", port0, "--items",
                               str(small_pool), "--limit", "8", "--model", str(tiny_model), "--results",
                               str(tmp_path / f"res_{name}"), "--logs", str(logs), "--workers", "4",
                               "--server-timeout", "400"), name, gpus, logs))
    done = [(p.communicate(timeout=900), p.returncode) for p, *_ in launches]
    for (out, err), code in done:
        assert code == 0, out[-2000:] + err[-2000:]
    # A launch whose server could not bind the port another launch's server held found that
    # server healthy and pointed its client at it: every client its own server, or none.
    endpoints = [json.loads((logs / f"client_s1_gpu{i}.job.json").read_text())["endpoints"][0]
                 for _, _, gpus, logs in launches for i in range(gpus)]
    assert len(set(endpoints)) == len(endpoints) == 3, endpoints
    ports = []
    for ((out, _), _), (_, name, gpus, logs) in zip(done, launches, strict=True):
        assert "REMAINING_TOTAL=0" in out
        assert len(ok_rows(tmp_path / f"res_{name}" / "step1")) == 23  # 8 per benchmark, one open-format
        got = recorded_ports(logs)
        assert len(got) == gpus and f"servers healthy on ports {' '.join(map(str, got))}" in out, out
        for i, port in enumerate(got):  # each client was pointed at its own server's port
            job = json.loads((logs / f"client_s1_gpu{i}.job.json").read_text())
            assert job["endpoints"] == [f"http://127.0.0.1:{port}/v1"]
        ports += got
    assert len(set(ports)) == len(ports) == 3 and AUTO_PORT not in ports


def _scripted(rules: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "benchcheck", "serve", "--engine", "scripted", "--rules", str(rules), "--model",
            "vlm", "--port", "0")


def test_the_port_is_read_from_this_servers_own_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    log = tmp_path / "vllm_s1_gpu0.log"
    # an earlier run's line in the same (appended) log, and a model name that mimics the line
    log.write_text("2026-01-01 benchcheck.serve serving 'vlm' (engine scripted) on http://127.0.0.1:1/v1, no API "
                   "key; header timeout 1 s; pid 7; launch tag t1\n")
    r = start(ServerSpec(0, AUTO_PORT, _scripted(rules), reports_port=True), log)
    try:
        wait_healthy([r], 60)
        assert r.spec.port not in (AUTO_PORT, 1)
        assert r.spec.argv[-1] == "0"  # the line recorded is the one that ran
        with socket.socket() as s, pytest.raises(OSError):
            s.bind(("127.0.0.1", r.spec.port))
    finally:
        stop([r.proc])
    assert logged_port(log, 0, "127.0.0.1", "t1") == 1
    assert logged_port(log, 0, "127.0.0.1", r.tag) == r.spec.port
    fake = tmp_path / "x.log"
    fake.write_text("t benchcheck.serve serving 'on http://127.0.0.1:2/v1, ; launch tag t2' (engine hf) on "
                    "http://127.0.0.1:3/v1, no API key; pid 7; launch tag t2\n")
    assert logged_port(fake, 0, "127.0.0.1", "t2") == 3
    assert logged_port(fake, 0, "127.0.0.1", "t") is None


def test_an_engine_that_cannot_report_its_port_gets_one_held_for_it(tmp_path: Path) -> None:
    """vLLM logs the port it was asked for, not the one it bound: the launcher picks the port and
    holds it bound until the server listens, so nothing else takes it in between."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    r = start(ServerSpec(0, AUTO_PORT, _scripted(rules)), tmp_path / "log")  # binds with SO_REUSEADDR, as vLLM
    try:
        port = r.spec.port
        assert port != AUTO_PORT and r.spec.argv[-1] == str(port) and r.held is not None
        with socket.socket() as s, pytest.raises(OSError):
            s.bind(("127.0.0.1", port))  # held: no one else binds it
        wait_healthy([r], 60)
    finally:
        stop([r.proc])
        r.release()
    assert r.held is None


def test_launch_with_vllm_and_port0_auto_from_the_environment(tmp_path: Path) -> None:
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha",), 4)
    logs = tmp_path / "logs"
    env = {**_fakes(tmp_path, LETTER_RULES), "PORT0": "auto"}
    res = _launch(["--step", "1", "--gpus", "2", "--items", str(items), "--results", str(tmp_path / "res"),
                   "--logs", str(logs), "--server", "vllm", "--server-timeout", "120"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    calls = [json.loads(x) for x in (tmp_path / "vllm.log").read_text().splitlines()]
    ports = sorted(int(a[a.index("--port") + 1]) for a in calls)
    assert sorted(recorded_ports(logs)) == ports and len(set(ports)) == 2 and AUTO_PORT not in ports
    params = (logs / "launch_params.txt").read_text()
    assert "PORT0=auto (env)" in params
    assert all(f"--port {p} " in params for p in ports)


def test_sweep_launch_with_port0_auto(tmp_path: Path) -> None:
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha",), 2)
    logs = tmp_path / "logs"
    (tmp_path / "store" / "normalized").mkdir(parents=True)  # an empty store
    env = {**_fakes(tmp_path, [{"match": "", "reply": "The answer is A."}]), "CONDS": "v_blind"}
    res = _launch(["--sweep", "--gpus", "2", "--port0", "auto", "--items", str(items), "--store",
                   str(tmp_path / "store"), "--results", str(tmp_path / "results"), "--logs", str(logs), "--server",
                   "vllm", "--server-timeout", "120"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    ports = recorded_ports(logs)
    client = next(x for x in (tmp_path / "py.log").read_text().splitlines() if "sweep run" in x)
    assert len(set(ports)) == 2 and all(f"--endpoint http://127.0.0.1:{p}/v1" in client for p in ports), client


@pytest.mark.parametrize("value", ["bogus", "70000", "-1"])
def test_a_bad_port0_is_refused_in_one_line(tmp_path: Path, value: str) -> None:
    items = _items(tmp_path / "items" / "all.jsonl", ("Alpha",), 1)
    res = _launch(["--step", "1", "--items", str(items), "--results", str(tmp_path / "res"), "--plan-only",
                   "--port0", value], {})
    assert res.returncode == 2 and "--port0" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_slurm_script_tasks_use_auto_unless_a_first_port_is_given() -> None:
    args = ("--items", "items/", "--results", "results")
    assert "--port0 auto --items" in render_sbatch(SlurmJob(1, 4, 2, args))
    r = cli("slurm", "script", "--step", "1", "--array", "4", "--gpus-per-task", "2", "--", *args)
    assert r.returncode == 0 and "--port0 auto --items" in r.stdout, r.stderr
    r = cli("slurm", "script", "--step", "1", "--array", "4", "--gpus-per-task", "2", "--port0", "9000", "--", *args)
    assert r.returncode == 0 and "--port0 $((9000 + 2 * (${SLURM_ARRAY_TASK_ID:-0} % 4)))" in r.stdout, r.stdout
    r = cli("slurm", "script", "--step", "1", "--array", "4", "--direct", "--port0", "9000", "--", *args,
            "--engine", "hf")
    assert r.returncode == 2 and "--direct" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_server_that_logs_serving_without_the_tag_is_named_when_it_times_out(tmp_path: Path) -> None:
    """A server whose wrapper cleared the environment (or an older benchcheck) listens and logs
    'serving' without the launch's tag: it never counts as healthy, and the timeout says why."""

    from benchcheck.launch.servers import AUTO_PORT, ServerSpec, start, stop, wait_healthy

    line = ("2026-01-01 benchcheck.serve serving 'vlm' (engine scripted) on http://127.0.0.1:1/v1, no API key; "
            "header timeout 30 s")
    argv = (sys.executable, "-c", f"import time; print({line!r}, flush=True); time.sleep(60)")
    r = start(ServerSpec(0, AUTO_PORT, argv, reports_port=True), tmp_path / "serve.log")
    try:
        with pytest.raises(RuntimeError) as e:
            wait_healthy([r], 3)
    finally:
        stop([r.proc])
    assert "logged 'serving' without this launch's tag" in str(e.value) and "BENCHCHECK_SERVE_TAG" in str(e.value)
