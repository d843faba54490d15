"""The statistics' small LAPACK calls on a busy machine: numpy's BLAS on its default threads (the
naive way) against one thread (what ``stats.threads`` gives the audit and the report's workers).

Each side runs in its own interpreter: ``--calls`` rounds of ``eigh`` and ``pinv`` of a 2x2 and one
``leggauss(64)`` in 100, with ``--hogs`` busy-loop processes taking the cores meanwhile (0: an idle
machine). Prints wall and CPU seconds of each side.

    python -m benchmarks.blas_threads [--calls 2000] [--hogs N (default: the cores)]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time

_WORK = """
import time, numpy as np
a = np.array([[2.0, 0.5], [0.5, 1.0]])
t, c = time.perf_counter(), time.process_time()
for i in range({calls}):
    np.linalg.eigh(a); np.linalg.pinv(a)
    if i % 100 == 0:
        np.polynomial.legendre.leggauss(64)
print(time.perf_counter() - t, time.process_time() - c)
"""


def _hog() -> None:
    while True:
        pass


def _side(calls: int, threads: int | None) -> tuple[float, float]:
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", _WORK.format(calls=calls)], capture_output=True, text=True,
                         env=env, check=True, timeout=3600).stdout.split()
    return float(out[0]), float(out[1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    time.sleep(0.5 if hogs else 0.0)
    try:
        naive = _side(args.calls, None)
        ours = _side(args.calls, 1)
    finally:
        for h in hogs:
            h.terminate()
    print(f"{args.calls} rounds of eigh + pinv (2x2), {args.calls // 100 + 1} leggauss(64); {args.hogs} busy "
          f"processes on {os.cpu_count()} cores")
    print("| BLAS threads | wall s | CPU s |\n|---|---:|---:|")
    print(f"| default (naive) | {naive[0]:.2f} | {naive[1]:.2f} |")
    print(f"| one (ours: the report's workers) | {ours[0]:.2f} | {ours[1]:.2f} |")
    print(f"ratio (wall): {naive[0] / max(ours[0], 1e-9):.1f}x")


if __name__ == "__main__":
    main()
