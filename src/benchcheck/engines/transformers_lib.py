"""transformers, imported on first use (engines and the checkpoint builders share this)."""

from __future__ import annotations

from typing import Any


def transformers_module() -> Any:
    """``transformers``, imported on first use and typed loosely: its annotations are partial
    (untyped constructors, ``**kwargs`` configs) and would otherwise leak into strict mypy."""
    import transformers

    return transformers
