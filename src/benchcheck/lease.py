"""Unit leases: one live process works a unit at a time (docs/ARCHITECTURE.md, "Leases").

A lease is an exclusive ``flock`` on a lock file beside the unit's rows, held for as long as the
process works the unit. The kernel drops it when the holder exits, however it exits (kill -9
included), so a unit whose worker died is taken over by the next process that asks; a second
process started on the same work by mistake (a resubmitted array task, a second launch) finds
the unit held and skips it. The lock file names the holder (pid, host, start) for the report.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from types import TracebackType

LEASE_DIR = ".leases"


def lock_path(target: str | Path) -> Path:
    """Where the lease of the unit whose rows go to ``target`` lives (ignored by row readers)."""
    t = Path(target)
    return t.parent / LEASE_DIR / f"{t.name}.lock"


class Lease:
    """A held lease; release it (or leave the ``with`` block) when the unit is done."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def try_lease(target: str | Path) -> Lease | None:
    """The lease of ``target``'s unit, or None when a live process holds it (never waits)."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={os.getpid()} host={socket.gethostname()} since={time.time():.0f}\n".encode(), 0)
    return Lease(fd, path)


def is_held(target: str | Path) -> bool:
    """Whether another live process holds ``target``'s lease now (a snapshot: it may change)."""
    if not lock_path(target).is_file():
        return False
    lease = try_lease(target)
    if lease is None:
        return True
    lease.release()
    return False


def holder(target: str | Path) -> str:
    """Who took the lease last (``pid=.. host=.. since=..``), or '' when unknown."""
    try:
        return lock_path(target).read_text(encoding="utf-8").strip()
    except OSError:
        return ""
