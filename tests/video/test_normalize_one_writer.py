"""Two ``videos normalize`` runs on one store: the second stops in one line before it writes, and the
first's index holds one row per key (both used to transcode every source and append its rows)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchcheck.lease import lock_path
from benchcheck.store import read_rows
from benchcheck.video.index import INDEX_FILE
from benchcheck.video.synth import make_test_video

BENCHCHECK = [sys.executable, "-m", "benchcheck"]


def flock_held(path: Path, pid: int) -> bool:
    """Whether process ``pid`` holds a flock on ``path`` (read from /proc/locks: looking takes no lock)."""
    try:
        inode = path.stat().st_ino
        locks = Path("/proc/locks").read_text()
    except OSError:
        return False
    return any(f.split()[1] == "FLOCK" and f.split()[4] == str(pid) and f.split()[5].endswith(f":{inode}")
               for f in locks.splitlines() if len(f.split()) > 5)


def test_a_second_normalize_on_the_same_store_stops_and_the_index_has_one_row_a_key(tmp_path: Path) -> None:
    src = tmp_path / "clips"
    src.mkdir()
    for i in range(6):
        make_test_video(src / f"c{i}.mp4", 64 + i, fps=8.0, width=320, height=240)  # six contents
    store = tmp_path / "store"
    cmd = [*BENCHCHECK, "videos", "normalize", str(src), "--store", str(store), "--no-progress"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    lock = lock_path(store / INDEX_FILE)
    deadline = time.time() + 120
    # Until the first holds the lease, not merely until its lock file exists: the file is made
    # before it is locked, and a run paused between the two let the second normalize everything.
    while not flock_held(lock, first.pid) and first.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert first.poll() is None, "the first run ended before it could be paused"
    os.killpg(first.pid, signal.SIGSTOP)  # holding the lease: the second runs to its end meanwhile
    try:
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    out1, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert b"6 normalized" in out1, out1
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "another `benchcheck videos normalize` is writing this store" in lines[0], lines
    assert str(store) in lines[0] and "Traceback" not in second.stderr
    rows = list(read_rows(store / INDEX_FILE))
    assert len(rows) == 6 and len({r["key"] for r in rows}) == 6
    # The lease is the kernel's: once the first has ended, the same command runs again and adds nothing.
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "6 skipped" in again.stdout, again.stdout
    assert len(list(read_rows(store / INDEX_FILE))) == 6
