"""A sweep run's job (``SweepArgs``): the items, store, results, conditions, engine and run
settings; what every executor reads (``executors/``, picked by name). Nothing here knows which
executor runs it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from benchcheck.items import Item
from benchcheck.sweep.engine import MIN_CONTEXT, SweepEngine
from benchcheck.sweep.results import SweepPaths
from benchcheck.video.plans import MAX_IMAGES, TOKEN_BUDGET


class PreconditionError(ValueError):
    """The run cannot start as asked (exit 2)."""


@dataclass(frozen=True, slots=True)
class SweepArgs:
    items: Sequence[Item]
    store: str | None
    paths: SweepPaths
    conds: str | None = None
    bench: str | None = None
    pilot: bool = False
    limit: int | None = None
    engine: SweepEngine = field(default_factory=SweepEngine)
    workers: int | None = None
    decode_workers: int | None = None
    chunk: int | None = None  # items per engine call; None: by engine (cli_run.sweep_calls)
    max_model_len: int | None = None
    min_context: int = MIN_CONTEXT  # lowered only by an explicit --min-context
    progress: bool = True
    token_budget: int = TOKEN_BUDGET
    max_images: int = MAX_IMAGES
    executor: str = "local"  # a name in executors.registry (docs/ray.md)
    ray_address: str | None = None  # ray: auto | HOST:PORT; None starts a local Ray
