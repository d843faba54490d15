"""kill -9 of `benchcheck qa run` takes the `--vlm-cmd` commands in flight with it (Linux).

SIGTERM and Ctrl-C are caught and end the commands; a kill -9 cannot be caught, and before, each
command in flight ran on by itself (for ever when it hung). Now the kernel kills it: it is started
with its parent-death signal set (`prctl(PR_SET_PDEATHSIG, SIGKILL)`).
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
from qa_servers import alive, qa_entry

HANG = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_kill_9_of_the_run_ends_the_vlm_commands_in_flight(tmp_path: Path, clips: Path,
                                                           write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it red?")])
    pidfile = tmp_path / "vlm.pid"
    template = f"{sys.executable} -c \"{HANG}\" {pidfile} {{video}} {{question}}"
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "PYTHONPATH") if k in os.environ}
    run = subprocess.Popen([sys.executable, "-c", "from benchcheck.cli import main; main()", "qa", "run",
                            "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(tmp_path / "out"),
                            "--skip-judge", "--timeout", "100", "--vlm-cmd", template],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        vlm_pid = int(pidfile.read_text())
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=20)
        deadline = time.monotonic() + 5
        while alive(vlm_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(vlm_pid), "the VLM command outlived a kill -9 of its run"
    finally:
        if run.poll() is None:
            run.kill()
        if pidfile.exists() and pidfile.read_text() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
