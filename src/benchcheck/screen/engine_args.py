"""The engine a screening job asks for: the step's pinned model unless one is given, then the
registry (``from_options``); no engine is named here."""

from __future__ import annotations

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
DEFAULT_CALL_ITEMS = {1: 64, 2: 64, 3: 48, 4: 64, 5: 48, 6: 48}


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
