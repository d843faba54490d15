"""A report's worker processes run numpy's BLAS on one thread (``report.site.one_blas_thread``):
the workers take the cores already, and OpenBLAS's own threads spinning for cores they did not get
made the statistics' small LAPACK calls many times slower on a busy machine."""

from __future__ import annotations

import subprocess
import sys

_CHECK = """
from threadpoolctl import threadpool_info
from benchcheck.report.site import one_blas_thread
one_blas_thread()
print(sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}))
"""


def test_a_report_worker_runs_blas_on_one_thread() -> None:
    env_free = {"PATH": "/usr/bin:/bin"}  # no OPENBLAS_NUM_THREADS / OMP_NUM_THREADS from outside
    r = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=120, env=env_free)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1]", r.stdout
