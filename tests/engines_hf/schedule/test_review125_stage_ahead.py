"""Staging ahead (``run_pipeline``'s ``stage``) when a batch runs out of device memory and is split:
the batch already staged behind it is not staged again when its turn comes after the halves."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from benchcheck.engines.base import Failure
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.pipeline import Encoded, Job, Plan, PlannedBatch, run_pipeline


def _encode(block: list[Job]) -> list[Encoded | Failure]:
    ids = np.arange(4, dtype=np.int64)
    return [Encoded(EncodedPrompt(ids, np.zeros_like(ids), (), None, None), 1, 0.0) for _ in block]


def test_a_batch_staged_behind_a_split_batch_is_staged_once() -> None:
    jobs = [Job(f"r{i}", "q", (), None, None, 1) for i in range(4)]
    plan = Plan(max_batch_size=2, max_batch_tokens=1 << 20, first_chunk=4)  # one chunk of two batches
    staged: list[list[int]] = []
    ran: list[list[int]] = []
    failed_once: list[bool] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        if len(batch.idx) > 1 and not failed_once:  # the first batch is too large once
            failed_once.append(True)
            raise torch.cuda.OutOfMemoryError("out of memory")
        ran.append(batch.idx)
        return lambda: [f"ok {jobs[i].request_id}" for i in batch.idx]

    def stage(batch: PlannedBatch, enc: list[Encoded]) -> None:
        staged.append(batch.idx)

    with ThreadPoolExecutor(1) as threads:
        out = run_pipeline(jobs, _encode, threads, plan, run, stage=stage)
    assert sorted(out) == [f"ok r{i}" for i in range(4)]  # type: ignore[type-var]
    assert len(ran) == 3  # two halves, then the second batch
    assert sorted(map(tuple, staged)) == sorted(map(tuple, ran[1:])), (staged, ran)  # every batch but the first, once
