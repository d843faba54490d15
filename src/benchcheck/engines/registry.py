"""Engines chosen by name and imported only when used (no if/elif factory).

Every engine class has ``from_options(EngineOptions) -> engine``. To add one: write the class
(the ``Engine`` protocol plus ``from_options``), add ``name: "module:Class"`` here; the CLI's
``--engine`` choices, ``serve`` and ``launch`` pick it up from ``ENGINES``.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, cast

from benchcheck.engines.base import Engine
from benchcheck.engines.options import EngineOptionError, EngineOptions

# name -> "module:Class"; the module is imported on first use.
ENGINES: dict[str, str] = {
    "hf": "benchcheck.engines.hf.engine:HFEngine",
    "openai": "benchcheck.engines.openai.client:OpenAIEngine",
    "scripted": "benchcheck.engines.rules.scripted:ScriptedEngine",
    "reference": "benchcheck.engines.rules.reference:ReferenceEngine",
    "reference-prior": "benchcheck.engines.rules.reference_prior:PriorReferenceEngine",
}
# Options only some engines read: (EngineOptions field, its flag, the engines that read it). Any
# other engine refuses one that is given: ``--engine openai --hf-config ops=-swiglu`` ran the
# server's own forwards, and ``--engine reference --rules FILE`` the reference rules, without a word.
ENGINE_ONLY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("hf_config", "--hf-config", ("hf",)),
    ("rules", "--rules", ("scripted",)),
    ("letter_tokenizer", "--letter-tokenizer", ("openai",)),
)
# Rule programs, not models: their answers are keyed by their own label and rule version (the
# engine's ``model_name``/``revision``), so a model's run never takes their rows for its own.
RULE_PROGRAMS = ("reference", "reference-prior")
# Engines that answer without a server of their own (``serve`` can put them behind one).
SERVABLE = ("hf", "scripted", "reference", "reference-prior")


class EngineClass(Protocol):
    def from_options(self, options: EngineOptions) -> Engine: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Engine: ...


def engine_names() -> list[str]:
    return sorted(ENGINES)


def engine_class(name: str) -> EngineClass:
    try:
        target = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(sorted(ENGINES))}") from None
    module, _, cls = target.partition(":")
    return cast(EngineClass, getattr(importlib.import_module(module), cls))


def unread_option(name: str, options: EngineOptions) -> str | None:
    """One line naming the first given option that engine ``name`` does not read, or None."""
    for field, flag, readers in ENGINE_ONLY:
        if getattr(options, field) and name not in readers:
            only = " or ".join(f"--engine {r}" for r in readers)
            return f"{flag} has no meaning with --engine {name} (only {only} reads it)"
    return None


def from_options(name: str, options: EngineOptions) -> Engine:
    """Build the engine registered under ``name`` from the common options (the usual way); an
    option it does not read is an ``EngineOptionError``."""
    why = unread_option(name, options)
    if why:
        raise EngineOptionError(why)
    return engine_class(name).from_options(options)


def create_engine(name: str, /, **kwargs: Any) -> Engine:
    """Build the engine registered under ``name`` with its own keyword arguments."""
    return engine_class(name)(**kwargs)
