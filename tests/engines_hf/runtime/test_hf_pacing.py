"""The launch pacer keeps the host at most ``depth`` blocks ahead and waits on the oldest."""

from __future__ import annotations

import pytest

from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.runtime.pacing import LaunchPacer, use_paced_launches


class _Point:
    def __init__(self, log: list[int], n: int) -> None:
        self.log, self.n = log, n

    def synchronize(self) -> None:
        self.log.append(self.n)


def _pacer(depth: int) -> tuple[LaunchPacer, list[int]]:
    waited: list[int] = []
    made = iter(range(1000))
    return LaunchPacer(depth, mark=lambda: _Point(waited, next(made))), waited


def test_waits_on_the_oldest_block_once_more_than_depth_are_queued() -> None:
    pacer, waited = _pacer(3)
    for _ in range(3):
        pacer(None, ())
    assert waited == []  # three blocks ahead: no wait yet
    pacer(None, ())
    assert waited == [0]  # the fourth launch waits for the first block
    for _ in range(4):
        pacer(None, ())
    assert waited == [0, 1, 2, 3, 4] and pacer.waits == 5  # each wait on the oldest, in order


def test_disabled_pacer_records_nothing() -> None:
    pacer, waited = _pacer(1)
    pacer.enabled = False
    for _ in range(5):
        pacer(None, ())
    assert waited == [] and pacer.waits == 0


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth"):
        LaunchPacer(0)


def test_cpu_engines_are_not_paced(hf_engine: HFEngine) -> None:
    assert hf_engine.pacer is None  # launches do not queue on the CPU
    assert use_paced_launches(hf_engine.model) is None
