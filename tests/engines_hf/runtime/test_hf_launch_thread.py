"""Op ``launch_thread``: the engine's device work launched from one thread of the model's own,
whichever thread calls, with the caller's context along (decision 113)."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def test_a_failure_on_the_launching_thread_reaches_the_caller(tiny_model: Path) -> None:
    # A batch that fails where it launches is the caller's to handle, as it is without the op: the
    # pipeline answers the bad request with a failure and the good one as it would alone.
    base = HFEngine(tiny_model, device="cpu")
    on = base.with_config(base.config.with_ops("+launch_thread"))
    on.stop_ids = base.stop_ids = set()
    good = GenerateRequest("good", "What is shown?", (make_jpeg(1, 64, 64),), max_tokens=2)
    bad = GenerateRequest("bad", "What is shown?", (b"not a jpeg",), max_tokens=2)
    got = {r.request_id: r for r in on.generate_sync([good, bad])}
    alone = base.generate_sync([good])[0]
    assert type(got["bad"]).__name__ == "Failure"
    assert got["good"].text == alone.text  # type: ignore[union-attr]
