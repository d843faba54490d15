"""Fakes for driving ``run_pipeline`` without a model: an executor that runs each task at once,
encodings of a four-token prompt, and a call of seven one-image requests with its plan."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np

from benchcheck.engines.base import Failure
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.pipeline import Encoded, Job, Plan


class AtOnce(Executor):
    """Runs each task as it is submitted: every chunk is encoded before the first batch runs."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_result(fn(*args, **kwargs))
        return fut


def encoded(new_tokens: int) -> Encoded:
    """A four-token prompt's encoding, generating ``new_tokens``."""
    ids = np.arange(4, dtype=np.int64)
    return Encoded(EncodedPrompt(ids, np.zeros_like(ids), (), None, None), new_tokens, 0.0)


def encode(block: list[Job]) -> list[Encoded | Failure]:
    """Every request's encoding generates one token."""
    return [encoded(1) for _ in block]


def encode_named(block: list[Job]) -> list[Encoded | Failure]:
    """Each request's encoding names it (its ``new_tokens``: the request's number)."""
    return [encoded(int(j.request_id[1:])) for j in block]


# One request per encoding block (each names an image), batches of at most 2, chunks of 1, 2, 4.
JOBS = [Job(f"r{i}", "q", (b"x",), None, None, 1) for i in range(7)]
PLAN = Plan(max_batch_size=2, max_batch_tokens=1 << 20, first_chunk=1)
