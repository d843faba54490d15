"""The reference library (seed 002, first copy) loaded from ../shared, as an oracle where present.

SPEC says the first copy (down to ``slurm_task``) is the reference and the second, tab-indented
copy is garbled; only the first is executed here. Nothing of it is part of the package.

A bare clone has no ``../shared``: :func:`load_reference` then answers ``None`` and the tests that
need the live reference skip *inside* the test (``reference_or_skip``); the golden vectors in
``golden/`` check the protocol everywhere. Never skip at import: that skips whole modules.
"""

from __future__ import annotations

import functools
import types
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = [_ROOT.parent / "shared" / "seeds", _ROOT / "shared" / "seeds"]


@functools.cache
def load_reference() -> types.SimpleNamespace | None:
    for d in _CANDIDATES:
        files = sorted(d.glob("002_*.txt")) if d.is_dir() else []
        if files:
            break
    else:
        return None
    text = files[0].read_text(encoding="utf-8")
    start = text.index('"""Shared paths')
    end = text.index('\n\t"""Shared paths')
    ns: dict[str, object] = {"__name__": "pool_common_reference", "__file__": str(files[0])}
    exec(compile(text[start:end], str(files[0]), "exec"), ns)
    return types.SimpleNamespace(**ns)


def reference_or_skip() -> types.SimpleNamespace:
    """The live reference, or skip the calling test (call it inside a test or a fixture)."""
    ref = load_reference()
    if ref is None:
        pytest.skip("the reference library (../shared/seeds/002_*.txt) is not beside this checkout")
    return ref
