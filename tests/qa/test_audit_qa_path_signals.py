"""SIGTERM or kill -9 of `benchcheck qa run` ends the `--vlm-cmd` processes of the items in flight.

Before, SIGTERM (what `timeout`, Slurm, systemd and `docker stop` send) killed the run at once
and left each VLM command in flight running on its own, for up to `--timeout` or for ever when
it hangs: the watchdog that would have ended it was gone with the run. It is now caught and ends
them as Ctrl-C does. A kill -9 cannot be caught: on Linux the kernel ends them, each started with
its parent-death signal set (`prctl(PR_SET_PDEATHSIG, SIGKILL)`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import alive, pipe_holders, qa_entry

HANG = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"


@pytest.mark.parametrize("sig", [
    signal.SIGTERM,
    signal.SIGINT,
    pytest.param(signal.SIGKILL, marks=pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                          reason="the parent-death signal is Linux's")),
])
def test_a_signal_to_the_run_ends_the_vlm_commands_in_flight(tmp_path: Path, clips: Path, sig: signal.Signals,
                                                             write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it red?"), qa_entry("b", "Is it blue?")])
    pidfile = tmp_path / "vlm.pid"
    template = f"{sys.executable} -c \"{HANG}\" {pidfile} {{video}} {{question}}"
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "PYTHONPATH") if k in os.environ}
    run = subprocess.Popen([sys.executable, "-c", "from benchcheck.cli import main; main()", "qa", "run",
                            "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(tmp_path / "out"),
                            "--skip-judge", "--timeout", "100", "--vlm-cmd", template],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        vlm_pid = int(pidfile.read_text())
        run.send_signal(sig)
        try:
            _, err = run.communicate(timeout=20)
        except subprocess.TimeoutExpired:  # name who keeps the killed run's pipes open
            holders = pipe_holders(run.stdout, run.stderr)
            pytest.fail(f"the run's output did not end 20 s after {sig.name}: its pipes are held by {holders}")
        if sig == signal.SIGKILL:
            assert run.returncode != 0
        else:  # Ctrl-C and SIGTERM: one line and 130 (as launch gives), not click's "Aborted!" and 1
            assert run.returncode == 130, err
            assert err.decode().splitlines()[-1].startswith("interrupted:"), err
        deadline = time.monotonic() + 5
        while alive(vlm_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(vlm_pid), "the VLM command outlived the run it belonged to"
    finally:
        if run.poll() is None:
            run.kill()
        if pidfile.exists() and pidfile.read_text() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
