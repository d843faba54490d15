"""`launch` with two CPU `benchcheck serve` processes gives the in-process engine's decisions; a server
that dies mid-run leaves error rows that the next run retries."""

from __future__ import annotations

import math
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from screen_helpers import cli, ok_rows, popen, write_rules

from benchcheck.store import read_rows
from loopback import wait_health


def free_port_block(n: int) -> int:
    """A first port p such that p..p+n-1 are free now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + n < 65535 and all(_free(p + i) for i in range(n)):
            return p
    raise RuntimeError("no free port block")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture()
def small_pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0
    return tmp_path / "items"


def test_launch_two_cpu_servers_matches_in_process(small_pool: Path, tmp_path: Path, tiny_model: Path) -> None:
    common = ["--items", str(small_pool), "--limit", "8", "--model", str(tiny_model)]
    local = cli("screen", "--step", "1", "--results", str(tmp_path / "local"), "--engine", "hf", "--device", "cpu",
                "--no-progress", *common)
    assert local.returncode == 0, local.stderr
    logs = tmp_path / "logs"
    launched = cli("launch", "--step", "1", "--gpus", "2", "--port0", str(free_port_block(2)), "--results",
                   str(tmp_path / "served"), "--logs", str(logs), "--workers", "4", "--server-timeout", "240",
                   *common, timeout=600)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert "REMAINING_TOTAL=0" in launched.stdout
    a, b = ok_rows(tmp_path / "local" / "step1"), ok_rows(tmp_path / "served" / "step1")
    assert set(a) == set(b) and len(a) == 23  # 8 per benchmark, one open-format item
    for i in a:
        assert a[i]["removed"] == b[i]["removed"] and a[i]["picks"] == b[i]["picks"], i
        for la, lb in zip(a[i]["lp"], b[i]["lp"], strict=True):
            assert all(math.isclose(x, y, abs_tol=1e-3) for x, y in zip(la, lb, strict=True)), i
    assert any(r["removed"] for r in a.values()) or any(max(r["margins"]) > 0 for r in a.values())
    for name in ("vllm_s1_gpu0.log", "vllm_s1_gpu1.log", "client_s1_gpu0.log", "client_s1_gpu1.log"):
        assert (logs / name).is_file(), name
    params = (logs / "launch_params.txt").read_text()
    assert params.count(" serve --model ") == 2 and "--port" in params
    runs = list(read_rows(tmp_path / "served" / "run_log.jsonl"))
    assert sorted(r["shard"] for r in runs) == [0, 1] and all(r["n_shards"] == 2 for r in runs)


def test_server_dying_mid_run_gives_error_rows_then_rerun_completes(small_pool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.json", delay_s=0.02)
    port = free_port_block(1)
    serve_args = ["serve", "--engine", "scripted", "--rules", str(rules), "--model", "judge", "--port", str(port),
                  "--served-model-name", "vlm"]
    server = popen(*serve_args)
    wait_health(f"http://127.0.0.1:{port}", timeout_s=60)
    res = tmp_path / "res"
    client = popen("screen", "--items", str(small_pool), "--step", "1", "--results", str(res), "--engine", "openai",
                   "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "vlm", "--workers", "4", "--no-progress")
    deadline = time.time() + 60
    while time.time() < deadline and sum(1 for f in (res / "step1").glob("*.jsonl") for _ in read_rows(f)) < 20:
        time.sleep(0.05)
    server.kill()
    server.wait()
    out, err = client.communicate(timeout=240)
    assert client.returncode == 3, err  # stopped early: rerun to go on
    assert "unreachable" in out
    rows = [r for f in (res / "step1").glob("*.jsonl") for r in read_rows(f)]
    errors = [r for r in rows if r.get("status") == "error"]
    assert errors and all(r["error_kind"] == "connection" and r["retry_free"] for r in errors)
    assert all(r["item_id"] for r in errors)
    server = popen(*serve_args)
    try:
        wait_health(f"http://127.0.0.1:{port}", timeout_s=60)
        again = cli("screen", "--items", str(small_pool), "--step", "1", "--results", str(res), "--engine", "openai",
                    "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "vlm", "--workers", "4", "--no-progress")
        assert again.returncode == 0, again.stderr
    finally:
        server.kill()
        server.wait()
    assert len(ok_rows(res / "step1")) == 269
    plan = cli("screen", "--items", str(small_pool), "--step", "1", "--results", str(res), "--plan-only").stdout
    assert plan.startswith("REMAINING_TOTAL=0\n") and "FAILED_TOTAL=0" in plan



def test_ctrl_c_stops_every_server_and_client(small_pool: Path, tmp_path: Path, tiny_model: Path) -> None:
    port0 = free_port_block(2)
    logs = tmp_path / "logs"
    # The child takes SIGINT's disposition from this process at exec: an ignored SIGINT stays
    # ignored (as under a shell's background job without job control, where a test run started
    # with `cmd &` saw the launch ignore Ctrl-C and finish with 0), a handled one starts default.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        p = popen("launch", "--step", "1", "--gpus", "2", "--port0", str(port0), "--items", str(small_pool),
                  "--results", str(tmp_path / "res"), "--logs", str(logs), "--model", str(tiny_model),
                  "--server-timeout", "240")
    finally:
        signal.signal(signal.SIGINT, inherited)
    deadline = time.time() + 240
    while time.time() < deadline and not (logs / "client_s1_gpu1.log").exists():
        time.sleep(0.1)
    assert (logs / "client_s1_gpu1.log").exists(), "clients never started"
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted" in out, out
    for port in (port0, port0 + 1):
        with socket.socket() as s, pytest.raises(OSError):
            s.connect(("127.0.0.1", port))  # nothing listens any more
    pids = [int(x) for x in subprocess.run(["pgrep", "-f", str(tiny_model)], capture_output=True,
                                           text=True).stdout.split()]
    assert not pids, f"processes left behind: {pids}"
