"""The reference library (seed 002, first copy) loaded from ../shared at test time, as an oracle.

SPEC says the first copy (down to ``slurm_task``) is the reference and the second, tab-indented
copy is garbled; only the first is executed here. Nothing of it is part of the package.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = [_ROOT.parent / "shared" / "seeds", _ROOT / "shared" / "seeds"]


def load_reference() -> types.SimpleNamespace:
    for d in _CANDIDATES:
        files = sorted(d.glob("002_*.txt")) if d.is_dir() else []
        if files:
            break
    else:
        pytest.skip("the reference library (../shared/seeds/002_*.txt) is not beside this checkout")
    text = files[0].read_text(encoding="utf-8")
    start = text.index('"""Shared paths')
    end = text.index('\n\t"""Shared paths')
    ns: dict[str, object] = {"__name__": "pool_common_reference", "__file__": str(files[0])}
    exec(compile(text[start:end], str(files[0]), "exec"), ns)
    return types.SimpleNamespace(**ns)
