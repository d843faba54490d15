"""Engines chosen by name and imported only when used (no if/elif factory)."""

from __future__ import annotations

import importlib
from typing import Any

from benchcheck.engines.base import Engine

# name -> "module:Class"; the module is imported on first use.
ENGINES: dict[str, str] = {
    "hf": "benchcheck.engines.hf:HFEngine",
    "openai": "benchcheck.engines.openai:OpenAIEngine",
    "scripted": "benchcheck.engines.scripted:ScriptedEngine",
    "reference": "benchcheck.engines.reference:ReferenceEngine",
}


def create_engine(name: str, /, **kwargs: Any) -> Engine:
    """Build the engine registered under ``name`` with its own keyword arguments."""
    try:
        target = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(sorted(ENGINES))}") from None
    module, _, cls = target.partition(":")
    engine: Engine = getattr(importlib.import_module(module), cls)(**kwargs)
    return engine
