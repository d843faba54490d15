"""numpy's BLAS on one thread while the statistics run.

The statistics' products are small (an EM round over at most 800 x 900, 2 x 2 inverses), far too
small for OpenBLAS's threads to pay for their start; on a busy machine its threads spin for cores
they do not get and make these calls several times slower (``benchmarks/blas_threads.py``,
decision 120). One rule for the audit's process and the report's workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread inside the block, as it was after it."""
    import numpy  # noqa: F401  (loaded first, so the limit reaches its BLAS)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def one_blas_thread_process() -> None:
    """A worker process's start (``initializer``): numpy's BLAS on one thread for its life."""
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
