"""A batch whose results run out of device memory when read (``run_pipeline``'s land: a held
``decode_join`` batch decodes only then) is split in halves as one that runs out when queued: every
request answered once, in order, each batch run with its own requests' encodings, every batch
staged at most once and only ahead of its own run, the last batch of a call retried as any other."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from pipeline_fakes import JOBS, PLAN, AtOnce, encode_named

from benchcheck.engines.base import Failure, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.score import PendingTop
from benchcheck.engines.hf.schedule.pipeline import Encoded, Plan, PlannedBatch, run_pipeline


class Device:
    """A fake ``run``: a batch of more than one request, all in ``short``, runs out of memory
    when its results are read; every event in order."""

    def __init__(self, short: set[int]) -> None:
        self.short = short
        self.events: list[tuple[str, tuple[int, ...]]] = []
        self.answered: Counter[int] = Counter()

    def run(self, batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        assert [e.new_tokens for e in enc] == batch.idx  # its own requests' encodings, in order
        key = tuple(batch.idx)
        self.events.append(("run", key))
        too_big = len(key) > 1 and set(key) <= self.short

        def land() -> list[str]:
            self.events.append(("land", key))
            if too_big:
                raise torch.cuda.OutOfMemoryError("injected: read")
            self.answered.update(batch.idx)
            return [f"ok {JOBS[i].request_id}" for i in batch.idx]

        return land

    def stage(self, batch: PlannedBatch, enc: list[Encoded]) -> None:
        assert [e.new_tokens for e in enc] == batch.idx
        self.events.append(("stage", tuple(batch.idx)))

    def runs(self) -> list[tuple[int, ...]]:
        return [k for kind, k in self.events if kind == "run"]


def _checked(device: Device, out: list[Any]) -> None:
    assert out == [f"ok r{i}" for i in range(len(JOBS))]
    assert device.answered == Counter(range(len(JOBS)))  # each request answered once
    runs = device.runs()
    for k in runs:  # each batch runs once, and lands once, after it ran
        assert runs.count(k) == 1, runs
        assert device.events.count(("land", k)) == 1
        assert device.events.index(("land", k)) > device.events.index(("run", k))
    stages = [k for kind, k in device.events if kind == "stage"]
    assert len(set(stages)) == len(stages), stages  # staged at most once
    for k in stages:  # and only ahead of its own run
        assert k in runs and device.events.index(("stage", k)) < device.events.index(("run", k))


def _plain(staging: bool) -> list[tuple[str, tuple[int, ...]]]:
    plain = Device(set())
    run_pipeline(JOBS, encode_named, AtOnce(), PLAN, plain.run, stage=plain.stage if staging else None)
    return plain.events


@pytest.mark.parametrize("staging", [False, True])
def test_a_middle_batch_split_when_landed_runs_again_in_halves_before_the_next_planned(staging: bool) -> None:
    # Chunks of 1, 2 and 4 requests: batches (0), (1, 2), then the last chunk's two pairs.
    plain = [k for kind, k in _plain(staging) if kind == "run"]
    assert plain[:2] == [(0,), (1, 2)] and len(plain) == 4
    device = Device({1, 2})
    out = run_pipeline(JOBS, encode_named, AtOnce(), PLAN, device.run, stage=device.stage if staging else None)
    _checked(device, out)
    # Landed once the batch after it is queued; its halves run next, then the rest as planned.
    assert device.runs() == [(0,), (1, 2), plain[2], (1,), (2,), plain[3]]
    if staging:
        at = device.events.index(("land", (1, 2)))
        assert device.events[at + 1 : at + 3] == [("stage", (2,)), ("run", (1,))]
        # The batch staged behind the one queued before the split is not staged again.
        assert [k for kind, k in device.events if kind == "stage"] == [(1, 2), plain[2], plain[3], (2,)]


@pytest.mark.parametrize("staging", [False, True])
def test_the_last_batch_of_a_call_split_when_landed_runs_again_in_halves(staging: bool) -> None:
    last = [k for kind, k in _plain(staging) if kind == "run"][-1]
    assert len(last) == 2
    device = Device(set(last))
    out = run_pipeline(JOBS, encode_named, AtOnce(), PLAN, device.run, stage=device.stage if staging else None)
    _checked(device, out)
    tail = [("land", last), ("run", last[:1]), ("run", last[1:]), ("land", last[:1]), ("land", last[1:])]
    if staging:  # the second half staged before the first runs
        tail.insert(1, ("stage", last[1:]))
    assert device.events[-len(tail):] == tail


def test_a_whole_call_split_when_landed_down_to_one_request_a_batch() -> None:
    """Every batch of more than one request runs out when read, however split: each request is
    answered once, by a batch of its own."""
    device = Device(set(range(len(JOBS))))
    out = run_pipeline(JOBS, encode_named, AtOnce(), PLAN, device.run, stage=device.stage)
    _checked(device, out)
    assert sorted(k for k in device.runs() if len(k) == 1) == [(i,) for i in range(len(JOBS))]


def test_one_request_that_runs_out_when_landed_fails_alone() -> None:
    jobs = JOBS[:3]

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        def land() -> list[str]:
            if batch.idx == [2]:
                raise torch.cuda.OutOfMemoryError("injected: read")
            return [f"ok {jobs[i].request_id}" for i in batch.idx]
        return land

    out = run_pipeline(jobs, encode_named, AtOnce(), Plan(max_batch_size=1, max_batch_tokens=1 << 20, first_chunk=1),
                       run)
    assert out[:2] == ["ok r0", "ok r1"]
    assert isinstance(out[2], Failure) and out[2].message == "out of device memory: injected: read"


def test_a_batch_split_when_queued_and_the_one_before_it_split_when_landed() -> None:
    """The batch queued runs out of memory, and landing the one before it does too: both are
    split, each request answered once."""
    plain = Device(set())
    run_pipeline(JOBS, encode_named, AtOnce(), PLAN, plain.run)
    pairs = [k for k in plain.runs() if len(k) == 2]
    assert len(pairs) >= 2
    queued, landed = pairs[-1], pairs[-2]
    events: list[tuple[int, ...]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        events.append(tuple(batch.idx))
        if tuple(batch.idx) == queued:
            raise torch.cuda.OutOfMemoryError("injected: queued")

        def land() -> list[str]:
            if tuple(batch.idx) == landed:
                raise torch.cuda.OutOfMemoryError("injected: read")
            return [f"ok {JOBS[i].request_id}" for i in batch.idx]
        return land

    out = run_pipeline(JOBS, encode_named, AtOnce(), PLAN, run)
    assert out == [f"ok r{i}" for i in range(len(JOBS))]
    assert Counter(i for k in events for i in k if k not in (queued, landed)) == Counter(range(len(JOBS)))


def test_a_scoring_batch_that_runs_out_when_read_is_split_with_the_same_scores(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """``score_sync`` shares the pipeline: a batch of several requests whose results run out of
    memory when read (once) runs again as halves, and every request scores as it does unsplit."""
    reqs = [ScoreRequest(f"s{i}", f"Is {i} odd? Answer A or B.") for i in range(4)]
    want = hf_engine.score_sync(reqs)
    real = PendingTop.wait
    failed: list[int] = []

    def wait_out_of_memory(self: PendingTop) -> tuple[torch.Tensor, torch.Tensor]:
        if self.values.shape[0] > 1 and not failed:
            failed.append(self.values.shape[0])
            raise torch.cuda.OutOfMemoryError("injected: read")
        return real(self)

    monkeypatch.setattr(PendingTop, "wait", wait_out_of_memory)
    got = hf_engine.score_sync(reqs)
    assert failed, "no batch of several requests"
    assert all(isinstance(g, LetterScores) for g in got), got
    assert [g.request_id for g in got] == [r.request_id for r in reqs]
    assert [g.top1_token for g in got] == [w.top1_token for w in want]  # type: ignore[union-attr]
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, LetterScores) and isinstance(w, LetterScores)
        assert [t["token"] for t in g.top] == [t["token"] for t in w.top]
        assert [t["logprob"] for t in g.top] == pytest.approx([t["logprob"] for t in w.top], abs=1e-4)
