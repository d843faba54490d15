"""The engine a screening job asks for: the step's pinned model unless one is given, then the
registry (``from_options``); no engine is named here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from benchcheck.defaults import STEP_WORKERS
from benchcheck.engines import Engine
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.registry import from_options
from benchcheck.screen.steps import MODELS, StepSpec

# Requests in flight per endpoint for a served engine when --workers is not given.
DEFAULT_WORKERS = STEP_WORKERS
# Items per call for an in-process engine when --batch-items is not given. Every call ends with a
# partial batch and a drained device pipeline, so fewer, larger calls keep the device busier
# (see decision 029); 32-frame items hold their
# decoded frames in memory until the call ends (about 11 MB each), so those steps take fewer.
# Steps 2 and 3 take more: a video's questions share its frames there, so each item is little
# device work and a small call leaves the device waiting on the host (decision 105).
DEFAULT_CALL_ITEMS = {1: 64, 2: 256, 3: 144, 4: 64, 5: 48, 6: 48}


def resolve_model(spec: StepSpec, model: str | None, revision: str | None) -> tuple[str, str | None]:
    """The step's pinned hub model unless one is given; a given hub name keeps a given revision."""
    ref = MODELS[spec.model]
    if model is None:
        return ref.name, revision or ref.revision
    if model == ref.name:
        return model, revision or ref.revision
    return model, revision


def build_engine(engine: str, spec: StepSpec, options: EngineOptions) -> Engine:
    """The registered engine ``engine`` for step ``spec``, the model resolved against the step's pin."""
    model, revision = resolve_model(spec, options.model, options.revision)
    from dataclasses import replace

    try:
        return from_options(engine, replace(options, model=model, revision=revision))
    except ValueError as e:
        # offline GPU nodes: the hub checkpoint is a precondition, not a crash (exit 2)
        if type(e).__name__ == "CheckpointUnavailable":  # hf's error; named, not imported (torch)
            raise ValueError(f"{e}; pass --model DIR (a local checkpoint folder) to run without the hub") from None
        raise


# The one default table of items per engine call, by the kind of engine (never by executor):
# ``served``: an OpenAI-compatible endpoint (one item per request, many requests in flight per
# endpoint); ``parallel``: an in-process engine that takes many calls at once (scripted, reference);
# ``serial``: an in-process engine that runs one forward at a time (hf), fed large calls.
EngineKind = Literal["served", "parallel", "serial"]
SERIAL_CALLS = 2  # in flight for a serial engine: the next call's frames decode while the device runs this one


def engine_kind(served: bool, concurrent_calls: int) -> EngineKind:
    return "served" if served else ("parallel" if concurrent_calls > 1 else "serial")


@dataclass(frozen=True, slots=True)
class CallShape:
    """Items per engine call and engine calls in flight, for one step on one kind of engine."""

    kind: EngineKind
    items_per_call: int
    calls: int  # in flight at once (all endpoints together)

    @property
    def at_once(self) -> int:
        """Items one engine holds at once: what the Ray executor's engine actor answers per call
        (its CPU actors prepare ahead, so a serial engine needs no second call in flight)."""
        return self.items_per_call * (1 if self.kind == "serial" else self.calls)


def call_shape(kind: EngineKind, step: int, workers: int | None = None, batch_items: int | None = None,
               n_endpoints: int = 1) -> CallShape:
    """The defaults of the table, or the given ``--workers`` (per endpoint when served) and ``--batch-items``."""
    if kind == "serial":
        return CallShape(kind, batch_items or DEFAULT_CALL_ITEMS[step], workers or SERIAL_CALLS)
    per = workers or DEFAULT_WORKERS[step]
    return CallShape(kind, batch_items or 1, per * (max(1, n_endpoints) if kind == "served" else 1))
