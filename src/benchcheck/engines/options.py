"""What a caller may tell any engine, in one record: each engine's ``from_options`` takes what it
needs from it and refuses, in one line, what it lacks (docs/ARCHITECTURE.md, "Engines")."""

from __future__ import annotations

from dataclasses import dataclass, field


class EngineOptionError(ValueError):
    """An engine was asked for without an option it needs (a usage error: exit 2)."""


@dataclass(frozen=True, slots=True)
class EngineOptions:
    model: str | None = None  # checkpoint folder, hub name, or the name a server answers to
    revision: str | None = None
    endpoints: tuple[str, ...] = ()  # openai: base URLs
    api_key: str | None = field(default=None, repr=False)  # never logged, never written to a file
    device: str = "auto"  # hf
    rules: str | None = None  # scripted: rules file
    workers: int | None = None  # requests in flight per endpoint (openai); None: the engine's default
    max_batch_size: int | None = None  # hf: most requests per forward
    served_name: str | None = None  # the model name rows and servers report
    max_model_len: int | None = None  # scripted: context length for the context-too-long check
    letter_tokenizer: str | None = None  # openai: a tokenizer folder, to ask for exact letter scores
