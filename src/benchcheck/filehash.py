"""A file's sha256, streamed: the one file hasher of the data returns (shard checks, fetches,
exports) and of the video store (a source's content hash is its video id).

In the bottom layer so both reach it: ``data`` sits above the tasks and ``video`` below them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# Read size: streamed in chunks of this, a file is never held whole (decision 035).
CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks (never the whole file in memory)."""
    h = hashlib.sha256()
    with Path(path).open("rb", buffering=0) as f:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()
