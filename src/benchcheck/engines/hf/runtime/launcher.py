"""One thread that launches a model's device work (op ``launch_thread``, decision 113).

PyTorch keeps some of its caches per thread: cuDNN's attention plans (``getMHAGraphCache_`` is
``thread_local``), cuBLAS handles. The engine's calls arrive on whichever thread the caller's
event loop picks, so each of those threads would build its own. A ``Launcher`` runs every batch's
launch on one thread of its own, with the caller's ``contextvars`` context (as
``asyncio.to_thread`` takes it along) and the model's CUDA device current there (a thread's
current device is its own). Exceptions reach the caller.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

T = TypeVar("T")


class Launcher:
    """The launching thread of one model; ``run`` is called one batch at a time (under the model's lock)."""

    def __init__(self, device: torch.device) -> None:
        def on_device() -> None:
            if device.type == "cuda":
                torch.cuda.set_device(device)

        self._pool = ThreadPoolExecutor(1, thread_name_prefix="hf-launch", initializer=on_device)

    def run(self, launch: Callable[[], T]) -> T:
        """``launch()`` on the launching thread, in a copy of the caller's context; its result or its exception."""
        return self._pool.submit(contextvars.copy_context().run, launch).result()

    def close(self) -> None:
        """Let the thread go once idle (a later ``run`` fails: make a new ``Launcher``)."""
        self._pool.shutdown(wait=False)
