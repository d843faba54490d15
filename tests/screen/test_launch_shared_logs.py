"""Two launches of one step with one ``--logs`` folder append to the same server logs: each takes
only its own server's "serving" line for that server's port.

The log is named by step and GPU (``vllm_s<step>_gpu<i>.log``) and opened for appending, so two
such launches at once (the default ``logs``, or the Slurm script's task folder, which named no job)
read each other's lines: whichever server announced first was adopted by both. With ``--port0
auto`` the slower launch sent its clients to the other launch's server; on a fixed port it took the
other's server for its own while its own was still loading.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from screen_helpers import cli, ok_rows, popen

from benchcheck.launch.servers import AUTO_PORT, ServerSpec, healthy, start, stop, wait_healthy


def _scripted(rules: Path) -> list[str]:
    return [sys.executable, "-m", "benchcheck", "serve", "--engine", "scripted", "--rules", str(rules), "--model",
            "vlm", "--port", "0"]


def test_a_server_is_not_given_the_port_another_server_of_its_log_announced(tmp_path: Path) -> None:
    """The reviewer's reproduction: A's server starts late (behind a shell, as a wrapper would run
    it), B's at once, both appending to one log; A used to adopt the port B announced."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    log = tmp_path / "vllm_s1_gpu0.log"
    gate = tmp_path / "gate"
    late = f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.1; done; {shlex.join(_scripted(rules))}"
    a = start(ServerSpec(0, AUTO_PORT, ("sh", "-c", late), reports_port=True), log)
    b = start(ServerSpec(0, AUTO_PORT, tuple(_scripted(rules)), reports_port=True), log)
    try:
        wait_healthy([b], 60)
        assert " serving " in log.read_text()  # B's line is in A's log too
        gate.touch()  # A's server starts only now
        wait_healthy([a], 60)
        assert a.spec.port not in (AUTO_PORT, b.spec.port), (a.spec.port, b.spec.port, log.read_text())
        stop([b.proc])
        assert healthy(a.spec.url) and not healthy(b.spec.url)  # A's port is A's own server
        lines = [x for x in log.read_text().splitlines() if " serving " in x]
        assert len(lines) == 2 and all(f"; launch tag {r.tag}" in x for r, x in zip((b, a), lines, strict=True))
    finally:
        gate.touch()
        stop([a.proc, b.proc])


def _gated_python(path: Path, command: str, gate: Path) -> Path:
    """An interpreter (PY) that starts ``benchcheck COMMAND`` only once ``gate`` exists."""
    path.write_text(f'#!/bin/sh\nif [ "$3" = {command} ]; then while [ ! -e {gate} ]; do sleep 0.1; done; fi\n'
                    f'exec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return path


def _wait_for(what: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return what()


class _Launches:
    """Launches of step 1 that share one --logs folder; each serves the model under its own name,
    so a client sent to the other launch's server is refused (404) instead of working there."""

    def __init__(self, tmp: Path, model: Path) -> None:
        assert cli("demo", "items", "--out", str(tmp / "items")).returncode == 0
        self.tmp, self.model, self.logs = tmp, model, tmp / "logs"

    def start(self, name: str, python: Path | str = sys.executable) -> subprocess.Popen[str]:
        return popen("launch", "--step", "1", "--gpus", "1", "--port0", "auto", "--server", "benchcheck", "--items",
                     str(self.tmp / "items"), "--limit", "2", "--model", str(self.model), "--served-model-name",
                     name, "--results", str(self.tmp / f"res_{name}"), "--logs", str(self.logs), "--workers", "2",
                     "--server-timeout", "300", "--python", str(python))

    def finished(self, name: str, p: subprocess.Popen[str]) -> int:
        """The launch's port, once it has exited 0 with every item done."""
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and "REMAINING_TOTAL=0" in out, out[-3000:] + err[-3000:]
        assert ok_rows(self.tmp / f"res_{name}" / "step1"), out[-3000:]
        m = re.search(r"1 servers healthy on ports (\d+)", out)
        assert m, out
        return int(m.group(1))


def test_two_launches_of_a_step_with_one_logs_folder_each_use_their_own_server(tmp_path: Path,
                                                                               tiny_model: Path) -> None:
    """A's server starts only after B's has announced its port in the log both append to: A used to
    take B's line for its own server's, and sent its clients to B's server."""
    runs = _Launches(tmp_path, tiny_model)
    gate = tmp_path / "gate"
    a = runs.start("a", _gated_python(tmp_path / "py_a", "serve", gate))
    b = None
    try:
        assert _wait_for((runs.logs / "vllm_s1_gpu0.log").exists, 120), a.communicate()
        b = runs.start("b")
        port_b = runs.finished("b", b)
        assert a.poll() is None  # still waiting for its own server
        gate.touch()
        port_a = runs.finished("a", a)
    finally:
        gate.touch()
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
    assert port_a != port_b
    serving = [x for x in (runs.logs / "vllm_s1_gpu0.log").read_text().splitlines() if " serving " in x]
    assert [f":{port_b}/v1," in serving[0], f":{port_a}/v1," in serving[1]] == [True, True], serving
    headers = [x for x in (runs.logs / "launch_params.txt").read_text().splitlines() if x.startswith("#")]
    assert [h.endswith(f"; ports {p}") for h, p in zip(headers, (port_b, port_a), strict=True)] == [True, True]


def test_a_client_works_its_own_launchs_job_though_another_launch_rewrote_the_job_file(tmp_path: Path,
                                                                                         tiny_model: Path) -> None:
    """Both launches write ``client_s1_gpu0.job.json``: A's client, started before B wrote it and
    reading it after, used to work B's job (B's items and results, B's server) and left A's undone."""
    runs = _Launches(tmp_path, tiny_model)
    gate = tmp_path / "gate"
    job_file = runs.logs / "client_s1_gpu0.job.json"
    a = runs.start("a", _gated_python(tmp_path / "py_a", "task", gate))
    b = None
    try:
        assert _wait_for(job_file.exists, 300), a.communicate()  # A's client started, not yet at work
        b = runs.start("b")
        runs.finished("b", b)
        assert json.loads(job_file.read_text())["model"] == "b"  # the record is the last launch's
        gate.touch()
        runs.finished("a", a)
    finally:
        gate.touch()
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
