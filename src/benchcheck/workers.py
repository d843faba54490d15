"""The project's process pools: workers started fresh (spawn), and gone when their parent is.

A pool's workers read their tasks from and write their results to pipes their parent owns, and
each worker holds the result pipe's reading end too. When the parent is killed outright (SIGKILL:
none of its code runs), a worker busy on a task later writes its result into a pipe nobody reads
and, once the pipe is full, waits forever, holding its memory and its open files. So every worker
watches its parent and exits as soon as it is gone.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

# How often a worker looks for its parent: the longest an orphan outlives it.
PARENT_POLL_S = 1.0


def process_pool(workers: int, initializer: Callable[..., object] | None = None,
                 initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (a forked child would inherit the parent's threads
    and sockets), each running ``initializer(*initargs)`` and exiting when this process is gone."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_started, initargs=(os.getpid(), initializer, initargs))


def _worker_started(parent: int, initializer: Callable[..., object] | None, initargs: tuple[Any, ...]) -> None:
    threading.Thread(target=_exit_without, args=(parent,), daemon=True, name="benchcheck-parent-watch").start()
    if initializer is not None:
        initializer(*initargs)


def _exit_without(parent: int) -> None:
    """Exit this worker once ``parent`` is no longer its parent (it died; the worker was re-parented)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)
