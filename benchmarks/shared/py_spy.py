"""A child command recorded by py-spy, as the benchmarks record their CLI children: every thread,
50 samples a second, without pausing the child (``--nonblocking``), raw collapsed stacks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def recorded(binary: str, out: Path, cmd: Sequence[str]) -> list[str]:
    """``cmd`` run under py-spy ``binary``, its samples written to ``out`` when the child ends or
    py-spy gets SIGINT."""
    return [binary, "record", "--nonblocking", "--threads", "-r", "50", "-f", "raw", "-o", str(out), "--", *cmd]
