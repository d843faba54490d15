"""Op ``launch_thread``: the engine's device work launched from one thread of the model's own,
whichever thread calls, with the caller's context along (decision 113)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.base import GenerateRequest, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


def test_calls_from_many_threads_launch_on_one_and_answer_the_same(tiny_model: Path) -> None:
    # Four calling threads, each its own call, generation and scoring: with the op on, every
    # forward of the language model runs on the one launching thread, which sees each caller's
    # context; with it off, on the callers' own threads. The answers are the same either way.
    base = HFEngine(tiny_model, device="cpu")
    base.stop_ids = set()
    on = base.with_config(base.config.with_ops("+launch_thread"))
    on.stop_ids = set()
    seen: list[tuple[str, str]] = []
    guard = threading.Lock()

    def note(_m: object, _a: object) -> None:
        with guard:
            seen.append((threading.current_thread().name, CALLER.get()))

    hook = base.model.model.language_model.register_forward_pre_hook(note)

    def ask(engine: HFEngine, k: int) -> tuple[list[str], list[float]]:
        CALLER.set(f"caller{k}")
        gen = engine.generate_sync([GenerateRequest(f"g{k}", f"What is shown? {k}", (make_jpeg(k, 64, 64),),
                                                    max_tokens=2)])
        score = engine.score_sync([ScoreRequest(f"s{k}", f"Pick one: A or B. {k}")])
        return [g.text for g in gen], [float(s.top[0]["logprob"]) for s in score]  # type: ignore[union-attr]

    try:
        with ThreadPoolExecutor(4, thread_name_prefix="caller") as callers:
            launched = list(callers.map(lambda k: ask(on, k), range(4)))
            on_threads = list(seen)
            seen.clear()
            plain = list(callers.map(lambda k: ask(base, k), range(4)))
    finally:
        hook.remove()
    assert launched == plain
    assert {name for name, _ in on_threads} == {"hf-launch_0"}
    assert {who for _, who in on_threads} == {f"caller{k}" for k in range(4)}  # each caller's context along
    assert all(name.startswith("caller") for name, _ in seen)
    assert on._state.launcher is base._state.launcher is not None  # the model's one thread, shared
    # Let go with the engine.
    thread = next(t for t in threading.enumerate() if t.name == "hf-launch_0")
    asyncio.run(on.aclose())
    thread.join(timeout=10)
    assert on._state.launcher is None and not thread.is_alive()


def test_a_failure_on_the_launching_thread_reaches_the_caller(tiny_model: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch too large for the device's memory, raised where the batch launches: the caller's
    # pipeline gets it and splits the batch, as without the op, and the halves are answered as
    # they would be alone.
    from benchcheck.engines.hf import engine as engine_mod

    base = HFEngine(tiny_model, device="cpu")
    on = base.with_config(base.config.with_ops("+launch_thread"))
    on.stop_ids = base.stop_ids = set()
    reqs = [GenerateRequest(f"r{i}", f"What is shown? {i}" + " Look." * i, (make_jpeg(i, 64, 64),), max_tokens=2)
            for i in range(2)]
    alone = [base.generate_sync([r])[0] for r in reqs]
    real = engine_mod.greedy_start
    where: list[tuple[str, int]] = []

    def tight(model: object, batch: object, max_new: list[int], *a: object, **kw: object) -> object:
        where.append((threading.current_thread().name, len(max_new)))
        if len(max_new) > 1:
            raise torch.cuda.OutOfMemoryError("simulated: the batch does not fit")
        return real(model, batch, max_new, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_mod, "greedy_start", tight)
    got = on.generate_sync(reqs)
    assert where == [("hf-launch_0", 2), ("hf-launch_0", 1), ("hf-launch_0", 1)]
    assert [g.text for g in got] == [g.text for g in alone]  # type: ignore[union-attr]
