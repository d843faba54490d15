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
    hf_config: tuple[str, ...] = ()  # hf: --hf-config KEY=VALUE pairs or a JSON file (HFConfig.parse)
    timeout_s: float | None = None  # openai: seconds one request may take; None: the engine's default
    max_retries: int | None = None  # openai: retries of a 429, 5xx or lost connection; None: the default


@dataclass(frozen=True, slots=True)
class EngineFlags:
    """The engine flags of the CLI (``screen`` jobs and ``sweep run`` share them): which registered
    engine and what to tell it. The API key is only the name of the variable that holds it, so a
    record of flags can be written to a job file or sent to a Ray actor without the secret."""

    engine: str = "hf"
    model: str | None = None
    revision: str | None = None
    endpoints: tuple[str, ...] = ()
    api_key_env: str | None = None
    device: str = "auto"
    rules: str | None = None
    hf_config: tuple[str, ...] = ()  # hf: --hf-config values (HFConfig.parse)

    def api_key(self) -> str | None:
        import os

        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def options(self, workers: int | None = None, *, model: str | None = None, revision: str | None = None,
                letter_tokenizer: str | None = None, with_key: bool = True) -> EngineOptions:
        """The registry's options (``model``/``revision`` override the flags'). ``with_key=False``
        where the key must not travel: a Ray engine actor reads it from its own node's environment."""
        return EngineOptions(model=model or self.model, revision=revision or self.revision, endpoints=self.endpoints,
                             api_key=self.api_key() if with_key else None, device=self.device, rules=self.rules,
                             workers=workers, letter_tokenizer=letter_tokenizer, hf_config=self.hf_config)
