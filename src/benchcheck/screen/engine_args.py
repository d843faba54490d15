"""Build the engine a screening command asked for (thin glue between CLI flags and the registry)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchcheck.engines import Engine, create_engine
from benchcheck.screen.steps import MODELS, StepSpec

# Client workers per step for a served engine (seed 000: 32 / 16 / 8 for steps 1 / 2 / 3).
DEFAULT_WORKERS = {1: 32, 2: 16, 3: 8, 4: 32, 5: 8, 6: 8}


@dataclass(frozen=True, slots=True)
class EngineArgs:
    engine: str
    model: str | None
    revision: str | None
    endpoints: Sequence[str]
    device: str
    rules: str | None
    api_key_env: str | None = None


def resolve_model(spec: StepSpec, model: str | None, revision: str | None) -> tuple[str, str | None]:
    """The step's pinned hub model unless one is given; a given hub name keeps a given revision."""
    ref = MODELS[spec.model]
    if model is None:
        return ref.name, revision or ref.revision
    if model == ref.name:
        return model, revision or ref.revision
    return model, revision


def build_engine(spec: StepSpec, args: EngineArgs) -> Engine:
    model, revision = resolve_model(spec, args.model, args.revision)
    kwargs: dict[str, Any]
    if args.engine == "openai":
        if not args.endpoints:
            raise ValueError("--engine openai needs at least one --endpoint URL")
        api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
        kwargs = {"endpoints": list(args.endpoints), "model": model, "revision": revision, "api_key": api_key,
                  "concurrency": DEFAULT_WORKERS[spec.number]}
    elif args.engine == "scripted":
        if not args.rules:
            raise ValueError("--engine scripted needs --rules FILE")
        kwargs = {"rules": args.rules}
    elif args.engine == "reference":
        kwargs = {}  # a deterministic program: nothing to load, nothing to choose
    else:
        kwargs = {"model": model, "revision": revision, "device": args.device}
    return create_engine(args.engine, **kwargs)
