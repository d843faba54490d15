"""Paced kernel launches: the thread that queues device work never blocks holding Python's lock.

A CUDA launch queue holds about a thousand kernels. When the host runs further ahead than that,
the next launch blocks inside CUDA until a slot frees, and PyTorch does not release Python's lock
(the GIL) around a launch: the engine's encoding threads (chat template, tokenizer, image
decoding) then cannot run for as long as the device takes to drain the queue. On the H200 that
was 1.3 s of a 2.3 s blind call ("Command Buffer Full" in the profile), and the batches those
threads should have encoded meanwhile arrived late, leaving the device idle between them.

Pacing keeps the host at most ``depth`` blocks (decoder layers, vision blocks) ahead of the
device: before launching a block it records an event, and once more than ``depth`` are
outstanding it waits for the oldest with ``Event.synchronize``, which releases the lock while it
waits. ``depth`` blocks are far fewer kernels than the queue holds, so the launching thread waits
here instead of inside CUDA, and the device still has ``depth`` blocks of work queued while the
host does anything else. Nothing about the computation changes: same kernels, same order.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import torch

# Blocks of work the host may queue ahead of the device. A text decoder layer is about 20
# kernels, a vision block about 15: 8 blocks are ~160 launches (the queue holds ~1,000), and at
# least a few milliseconds of device time even for the smallest scoring batch.
DEPTH = 8


class Marker(Protocol):
    """A point in the device's queue (a CUDA event)."""

    def synchronize(self) -> None: ...


def _cuda_marker() -> Marker:
    event: Marker = torch.cuda.current_stream().record_event()
    return event


class LaunchPacer:
    """A forward pre-hook that waits, without Python's lock, while ``depth`` blocks are queued.
    ``mark`` records a point in the device's queue (default: a CUDA event on the current stream)."""

    def __init__(self, depth: int = DEPTH, mark: Callable[[], Marker] = _cuda_marker) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self.depth = depth
        self.enabled = True
        self.waits = 0  # how often the host was ahead by more than ``depth`` blocks
        self._mark = mark
        self._events: deque[Marker] = deque()
        self._guard = threading.Lock()  # two engine calls in flight run their forwards in turn, but
        # a hook must never see another thread's half-updated queue

    def __call__(self, module: Any, args: Any) -> None:
        if not self.enabled:
            return
        event = self._mark()
        with self._guard:
            self._events.append(event)
            late = [self._events.popleft() for _ in range(len(self._events) - self.depth)]
        for e in late:
            self.waits += 1
            e.synchronize()  # releases the GIL while the device catches up


def use_paced_launches(model: Any, depth: int = DEPTH) -> LaunchPacer | None:
    """Pace the launches of ``model``'s text decoder layers and vision blocks (a Qwen3-VL model on
    CUDA); returns the pacer (``enabled = False`` turns it off), or None on other devices, where
    launches do not queue."""
    if next(model.parameters()).device.type != "cuda":
        return None
    pacer = LaunchPacer(depth)
    inner = model.model
    for block in [*inner.language_model.layers, *inner.visual.blocks]:
        block.register_forward_pre_hook(pacer)
    return pacer
