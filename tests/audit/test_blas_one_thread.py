"""numpy's BLAS on one thread while the statistics run (``stats.threads``): the report's worker
processes for their life, the audit for the length of ``audit_forwards``. Their products are
small, and OpenBLAS's own threads spinning for cores they did not get made them many times slower
on a busy machine."""

from __future__ import annotations

import subprocess
import sys

_CHECK = """
from threadpoolctl import threadpool_info
import numpy
def blas():
    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
before = blas()
from benchcheck.stats.threads import one_blas_thread, one_blas_thread_process
import benchcheck.audit.run as run
from benchcheck.audit.worlds import WorldSpec, build_world
seen = []
real = run.confidences
def confidences(*a, **k):
    seen.append(blas())
    return real(*a, **k)
run.confidences = confidences
w = build_world(WorldSpec(n=40, k=4, noise_sd=0.5), 0)
run.audit_forwards({1: w.rows}, rounds=20)
after = blas()
one_blas_thread_process()
print(before == after, seen, blas())
"""


def test_blas_runs_on_one_thread_in_the_audit_and_the_report_workers() -> None:
    env = {"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "2"}  # two threads by default, whatever the machine
    r = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True [[1]] [1]", r.stdout
