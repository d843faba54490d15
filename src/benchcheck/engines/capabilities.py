"""Optional engine capabilities: asked for through these protocols, never guessed from a name.

An engine provides a capability by having the member; callers ask with ``isinstance`` (the
protocols are runtime-checkable) or through the helpers below, which answer None when the
engine does not provide it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from benchcheck.engines.base import Engine, GenerateRequest


@runtime_checkable
class CountsTokens(Protocol):
    """Counts a prompt's tokens as the engine counts them against its context (blocking)."""

    def count_tokens(self, req: GenerateRequest) -> int: ...


@runtime_checkable
class HasContextLength(Protocol):
    max_model_len: int


@runtime_checkable
class LabelsServedId(Protocol):
    """An engine whose answers are not a model's (scripted) says so in the id a server reports."""

    def served_id(self, name: str) -> str: ...


@runtime_checkable
class HasCallConcurrency(Protocol):
    """How many engine calls may run at once behind a server (1 for a model on one device)."""

    concurrent_calls: int


@runtime_checkable
class ListsServedModels(Protocol):
    """Lists the model ids each endpoint serves (``GET /v1/models``), by endpoint URL."""

    async def served_models(self) -> dict[str, list[str]]: ...


async def served_models(engine: Engine) -> dict[str, list[str]]:
    """The ids each endpoint lists; empty for an engine without endpoints."""
    return await engine.served_models() if isinstance(engine, ListsServedModels) else {}


def count_tokens(engine: Engine, req: GenerateRequest) -> int | None:
    return int(engine.count_tokens(req)) if isinstance(engine, CountsTokens) else None


def max_model_len(engine: Engine) -> int | None:
    if not isinstance(engine, HasContextLength):
        return None
    n = engine.max_model_len
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def served_id(engine: Engine, name: str) -> str:
    return engine.served_id(name) if isinstance(engine, LabelsServedId) else name


def concurrent_calls(engine: Engine, default: int = 1) -> int:
    return int(engine.concurrent_calls) if isinstance(engine, HasCallConcurrency) else default


def local_gpus(engine: Engine) -> int:
    """GPUs an in-process engine computes on (1 for a model on a CUDA device, else 0): what a run
    records when no launcher said how many GPUs stood behind it."""
    device = getattr(engine, "device", None)
    return 1 if getattr(device, "type", str(device or "")).startswith("cuda") else 0
