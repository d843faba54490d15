"""The ``hf`` engine's Triton kernels: the lowest layer (imports nothing else of the engine).

Each kernel is two modules: ``<op>.py`` says what it computes (its reference in plain torch),
which inputs it takes (``supported``) and its constants, and imports without Triton;
``<op>_triton.py`` holds the Triton source, its ``CONFIGS`` (what the tuner times) and the
launcher, and is imported only where ``triton_available()``. docs/ARCHITECTURE.md says how to
add one.
"""

from __future__ import annotations

import functools


@functools.cache
def triton_available() -> bool:
    """Triton can be imported and run (torch's CUDA builds bring it)."""
    try:
        from torch.utils._triton import has_triton
    except ImportError:
        return False
    return bool(has_triton())
