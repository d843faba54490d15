"""The price of ending everything a ``--vlm-cmd`` leaves behind: the item runner before and after.

Compares, side by side in one run, ``benchcheck.qa.proc.run_with_watchdog`` (pipes collected as
they arrive, the item's processes found through /proc children lists, the item token and the
subreaper, then killed and reaped) with the runner it replaced (``git show
45fa848:src/benchcheck/qa/vlm_cmd.py``, process group kill only), on a trivial command, so the
difference is the per-item overhead. Pass the old module's path to compare (it is not kept in
the tree); without it only the new runner is timed.

    git show 45fa848:src/benchcheck/qa/vlm_cmd.py \\
      | sed 's/benchcheck.qa.redact import Redactor/benchcheck.masking import Masker as Redactor/' > /tmp/oldvlm.py
    python -m benchmarks.qa_cmd_cleanup --old /tmp/oldvlm.py --calls 50
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchcheck.qa import proc

CMD = 'printf \'{"answer": "yes", "model": "m"}\''
Runner = Callable[[list[str], float], Awaitable[Any]]


def ms_per_call(run: Runner, calls: int, rounds: int = 3) -> float:
    async def go() -> None:
        for _ in range(calls):
            res = await run(["/bin/sh", "-c", CMD], 30)
            assert b"yes" in res.stdout

    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        asyncio.run(go())
        best = min(best, time.perf_counter() - t)
    return 1000 * best / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default=None, help="path of the old vlm_cmd.py to compare with")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    proc.enable_subreaper()  # as `qa run` does
    old: Runner | None = None
    if a.old:
        spec = importlib.util.spec_from_file_location("oldvlm", a.old)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["oldvlm"] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        old = mod.run_with_watchdog
    print("| repeat | old runner ms/call | new runner ms/call |\n|---|---:|---:|")
    for i in range(a.repeats):
        o = f"{ms_per_call(old, a.calls):.2f}" if old else "-"
        print(f"| {i + 1} | {o} | {ms_per_call(proc.run_with_watchdog, a.calls):.2f} |")


if __name__ == "__main__":
    main()
