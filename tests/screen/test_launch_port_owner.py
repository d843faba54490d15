"""A launch on a fixed ``--port0`` uses only its own server: when another launch's server got the
port first, the launch fails naming the port, and no client of it is pointed there.

Two launches that both found the port free before either server had bound it: the loser's
server could not bind it, but its health check asked the port, found the winner's server
healthy while its own process still lived (loading its model), and its clients worked through
the other launch's server; the run exited 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
from screen_helpers import cli, popen

from benchcheck.launch.servers import ServerSpec, start, stop, wait_healthy
from loopback import free_port


def _wait_for(what: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return what()


def _gated_python(path: Path, command: str, gate: Path) -> Path:
    """An interpreter (PY) that starts ``benchcheck COMMAND`` only once ``gate`` exists."""
    path.write_text(f'#!/bin/sh\nif [ "$3" = {command} ]; then while [ ! -e {gate} ]; do sleep 0.1; done; fi\n'
                    f'exec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return path


def test_the_launch_whose_port_another_launchs_server_took_fails_naming_it(tmp_path: Path, tiny_model: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    port = free_port()
    late_server, held_clients = tmp_path / "late_server", tmp_path / "held_clients"

    def launch(name: str, python: Path) -> subprocess.Popen[str]:
        return popen("launch", "--step", "1", "--gpus", "1", "--port0", str(port), "--items", str(tmp_path / "items"),
                     "--limit", "2", "--model", str(tiny_model), "--results", str(tmp_path / f"res_{name}"), "--logs",
                     str(tmp_path / f"logs_{name}"), "--workers", "2", "--server-timeout", "300", "--python",
                     str(python))

    # The loser checks the port and starts its server, which waits before it loads the model.
    loser = launch("loser", _gated_python(tmp_path / "py_loser", "serve", late_server))
    winner = None
    try:
        assert _wait_for((tmp_path / "logs_loser" / "vllm_s1_gpu0.log").exists, 120), loser.communicate()
        # The winner found the port free too; its server binds it and stays up (its clients wait).
        winner = launch("winner", _gated_python(tmp_path / "py_winner", "task", held_clients))
        winner_log = tmp_path / "logs_winner" / "vllm_s1_gpu0.log"
        assert _wait_for(lambda: winner_log.exists() and " serving " in winner_log.read_text(), 300), \
            winner.communicate()
        # Time for the loser's health check to find the winner's server (it used to start its clients
        # then), before its own server loads, fails to bind the port, and exits.
        _wait_for((tmp_path / "logs_loser" / "client_s1_gpu0.log").exists, 5)
        late_server.touch()
        out, err = loser.communicate(timeout=300)
    finally:
        late_server.touch()
        held_clients.touch()
        if loser.poll() is None:
            loser.kill()
    assert loser.returncode == 2, out + err
    line = f"server 0: port {port} is served by another process, not this launch's server"
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and line in errors[0] and "Traceback" not in err, err
    assert not (tmp_path / "logs_loser" / "client_s1_gpu0.log").exists()  # no client pointed at the port
    assert not (tmp_path / "logs_loser" / "launch_params.txt").exists()
    out, err = winner.communicate(timeout=600)
    assert winner.returncode == 0 and "REMAINING_TOTAL=0" in out, out[-2000:] + err[-2000:]


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="tells listeners apart by /proc (Linux)")
def test_a_server_that_cannot_report_its_port_is_not_taken_for_the_process_that_answers_there(
        tmp_path: Path) -> None:
    """vLLM logs the port it was asked for, not whether it bound it: a server still starting (alive,
    not listening) on a port where another process answers /health is that process's, not this one."""
    port = free_port()
    r = start(ServerSpec(0, port, (sys.executable, "-c", "import time; time.sleep(120)")), tmp_path / "log")
    stranger = ThreadingHTTPServer(("127.0.0.1", port), _Healthy)  # bound after the launcher found the port free
    Thread(target=stranger.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RuntimeError, match=rf"^server 0: port {port} is served by another process, not this "
                                               "launch's server"):
            wait_healthy([r], 30)
    finally:
        stranger.shutdown()
        stranger.server_close()
        stop([r.proc])
