"""Frame decoding in a pool of worker processes, so the engine never waits on one core.

The fps ladders decode up to 582 frames per video; one process decodes one video at a time
with one codec thread (``video.decode``), and ``workers`` processes decode in parallel while
the event loop keeps the engine busy. ``workers=0`` decodes in a thread of this process
(tests, tiny runs). The plan is computed by the caller (the dry-run needs it too); workers get
the plan and return the JPEG bytes and the seconds they spent.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

from benchcheck.masking import drop_secret_variables
from benchcheck.protocol import JPEG_QUALITY
from benchcheck.video.plans import FramePlan
from benchcheck.workers import process_pool


def decode_job(store: str, video_id: str, plan: FramePlan, quality: int = JPEG_QUALITY) -> tuple[list[bytes], float]:
    """Worker: the plan's JPEGs and the decode wall time (``ValueError`` naming the file on failure)."""
    from benchcheck.video.extract import extract_plan

    t0 = time.perf_counter()
    result = extract_plan(Path(store), video_id, plan, quality)
    return result.jpegs, time.perf_counter() - t0


def default_workers() -> int:
    return max(1, (os.cpu_count() or 2) - 1)


class FramePool:
    """``await pool.frames(video_id, plan)`` decodes in a worker process (or a thread when 0)."""

    def __init__(self, store: Path | None, workers: int | None = None, secret_names: tuple[str, ...] = ()) -> None:
        self.store = store
        n = default_workers() if workers is None else workers
        self.workers = n
        # The workers drop the secret-named variables (as the hf engine's decoders do) and
        # ``secret_names`` (the --api-key-env variable, whatever its name).
        self._pool: Executor = (process_pool(n, drop_secret_variables, secret_names)
                                if n > 0 else ThreadPoolExecutor(1))

    async def frames(self, video_id: str, plan: FramePlan, quality: int = JPEG_QUALITY) -> tuple[list[bytes], float]:
        if self.store is None:
            raise ValueError("no --store given")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, decode_job, str(self.store), video_id, plan, quality)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
