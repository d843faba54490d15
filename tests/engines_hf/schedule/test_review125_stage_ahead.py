"""Staging ahead (``run_pipeline``'s ``stage``) when a batch runs out of device memory and is split:
the batch already staged behind it is not staged again when its turn comes after the halves."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch
from hf_helpers import make_jpeg, variant
from pipeline_fakes import encode

from benchcheck.engines.base import GenerateRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.schedule.pipeline import Encoded, Job, Plan, PlannedBatch, run_pipeline


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
        out = run_pipeline(jobs, encode, threads, plan, run, stage=stage)
    assert sorted(out) == [f"ok r{i}" for i in range(4)]  # type: ignore[type-var]
    assert len(ran) == 3  # two halves, then the second batch
    assert sorted(map(tuple, staged)) == sorted(map(tuple, ran[1:])), (staged, ran)  # every batch but the first, once


def test_two_calls_at_once_share_the_staging_thread_and_each_gets_its_own_texts(hf_engine: HFEngine) -> None:
    """Two ``generate_sync`` calls on one engine, each with batches staged ahead on the model's one
    staging thread: every request's text is the one it gets with staging off, in its call's order."""
    calls = [[GenerateRequest(f"{c}{i}", f"Describe scene {c} {i}.", images=(make_jpeg(7 * i + ord(c)),) * (1 + i % 2),
                              max_tokens=2 + i % 3) for i in range(6)] for c in "ab"]
    inline = variant(hf_engine, "-stage_ahead", first_chunk=6)
    want = [[g.text for g in inline.generate_sync(r)] for r in calls]  # type: ignore[attr-defined]
    ahead = variant(hf_engine, "+stage_ahead", first_chunk=6, max_batch_size=2)
    with ThreadPoolExecutor(2) as callers:
        got = list(callers.map(ahead.generate_sync, calls))  # type: ignore[attr-defined]
    assert [[g.request_id for g in out] for out in got] == [[r.request_id for r in reqs] for reqs in calls]
    assert [[g.text for g in out] for out in got] == want  # type: ignore[union-attr]
