"""A normalize work function for worker processes that fails on chosen sources (by file name).

``boom*``: raises inside the worker; ``die*``: the worker process exits at once (as a decoder
crash or the OOM killer would); anything else is normalized for real.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchcheck.video.store import NormalizeOutcome, SourceFile, normalize_one


def work(src: SourceFile, store: Path, threads: int) -> NormalizeOutcome:
    if src.path.name.startswith("boom"):
        raise RuntimeError(f"injected failure on {src.path.name}")
    if src.path.name.startswith("die"):
        os._exit(9)
    return normalize_one(src, store, threads)
