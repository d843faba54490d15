"""The ``hf`` engine's Triton kernels: the lowest layer (imports nothing else of the engine).

Each kernel is two modules: ``<op>.py`` says what it computes (its reference in plain torch),
which inputs it takes (``supported``) and its constants, and imports without Triton;
``<op>_triton.py`` holds the Triton source, its ``CONFIGS`` (what the tuner times) and the
launcher, and is imported only where ``triton_available()``. docs/ARCHITECTURE.md says how to
add one.
"""

from __future__ import annotations

import functools
import logging

import torch

log = logging.getLogger(__name__)


@functools.cache
def triton_available() -> bool:
    """Triton can be imported and run (torch's CUDA builds bring it)."""
    try:
        from torch.utils._triton import has_triton
    except ImportError:
        return False
    return bool(has_triton())


# (kernel, device) pairs whose launch Triton refused (a GPU with less shared memory than the
# kernel's tiles need): their callers take their fallback from then on.
_REFUSED: set[tuple[str, torch.device]] = set()


def refused(kernel: str, device: torch.device) -> bool:
    """``kernel``'s launch was refused on ``device`` before (``refuse``)."""
    return (kernel, device) in _REFUSED


def refuse(kernel: str, device: torch.device, err: Exception, fallback: str) -> None:
    """``kernel``'s launch on ``device`` refused (Triton's ``OutOfResources``, raised before
    anything runs): ``fallback`` from now on there, with one warning."""
    if (kernel, device) not in _REFUSED:
        log.warning("the %s kernel cannot run on %s (%s); %s instead", kernel, device, err, fallback)
    _REFUSED.add((kernel, device))
