"""The project's process pools: a worker does not outlive its parent, even one killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchcheck.workers import PARENT_POLL_S

# A parent that starts a pool, hands it a task that runs a minute, prints the worker's pid and
# waits: the test kills it with SIGKILL, so none of its clean-up runs.
PARENT = """
import os, sys, time
from benchcheck.workers import process_pool

def task():
    print(os.getpid(), flush=True)
    time.sleep(60)

if __name__ == "__main__":
    pool = process_pool(1)
    pool.submit(task)
    time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_pool_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    worker = 0
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10 * PARENT_POLL_S + 5
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(worker), "the worker outlived its killed parent"
    finally:
        parent.kill()
        if worker and alive(worker):
            os.kill(worker, signal.SIGKILL)
