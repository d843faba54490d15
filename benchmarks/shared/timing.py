"""The least time of a few runs of the same work: the run the machine disturbed least."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 3, clock: Callable[[], float] = time.perf_counter) -> float:
    """The least ``clock`` seconds ``fn`` took over ``repeats`` runs (``time.process_time``: this
    process's CPU seconds, for a shared machine)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best
