"""Images of a request -> resized RGB frames, in the calling thread or in worker processes.

The ``hf`` engine decodes each image as the model's PIL image processor would (PIL decode,
``smart_resize`` to multiples of the patch grid, the processor's resampling) and keeps it as
uint8; rescaling, normalizing and patchifying happen on the device (``forward.pixels``).

Why worker processes: decoding leaves Python's lock, but the rest of each image's handling
(PIL's Python-level file parsing, ``tobytes`` in 64 KiB pieces, the array copy) holds it, and
the thread that launches the device work needs that lock for every operation it queues. On an
H200 host two decoding threads made the 2B 32-frame batches that ran while they decoded take
1.5-2x their device time (decision 014). Workers hold their own locks (the 2B
32-frame workload 18.3 against 16.9 items/s decoded in threads). A worker leaves its frames in
a shared-memory block and sends back only the block's name (``SharedFrames``): through the
pool's pipe, 11 MB of pickled frames a 32-frame request were read in 64 KiB pieces and
unpickled by the pool's result thread with the lock held, most of the lock time the engine's
process spent outside the launching thread (``py-spy --gil``, decision 014;
H200, 2B 32 frames: 18.6 / 18.0 items/s against 15.8 / 17.8 through the pipe).
Workers are spawned, not forked (a forked child would inherit the engine's threads and CUDA
state) and start on the first request with images. What they run needs PIL and NumPy only, but
Python's spawn also imports the main script in each worker: keep it behind
``if __name__ == "__main__":`` (``benchcheck``'s own entry points are). Workers ignore
Ctrl-C (the engine's process handles it) and drop secret-named variables from their environment
(``masking.drop_secret_variables``) when they start; the variables were in the environment they
were started with, which only the same user can read, as the engine's own.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import signal
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from benchcheck.engines.base import ImageRef
from benchcheck.imagesize import processor_size
from benchcheck.workers import process_pool

log = logging.getLogger("benchcheck.engines.hf.engine")


class BadInput(ValueError):
    """A request that can never be answered as given (unreadable image, placeholder in text)."""


@dataclass(frozen=True, slots=True)
class ResizeRule:
    """The processor's resize: sides to multiples of ``factor`` (patch size x spatial merge),
    the area within ``[min_pixels, max_pixels]``, PIL resampling ``resample``; None: as is."""

    factor: int | None
    min_pixels: int = 56 * 56  # the processor's own defaults
    max_pixels: int = 28 * 28 * 1280
    resample: int = int(Image.Resampling.BICUBIC)

    def size(self, height: int, width: int) -> tuple[int, int]:
        """(height, width) after resizing; ``ValueError`` for an image the processor refuses.

        The rule of the Qwen2-VL image processor's ``smart_resize`` (tests check it against
        transformers' own): round each side to the nearest multiple of ``factor``, then scale
        both down (floor) or up (ceil) by one factor when the area leaves the bounds.
        """
        f = self.factor
        if f is None:
            return height, width
        return processor_size(height, width, f, self.min_pixels, self.max_pixels)


def describe(ref: ImageRef, index: int) -> str:
    return f"image {index} ({ref})" if isinstance(ref, Path) else f"image {index} ({len(ref)} bytes)"


def load_image(ref: ImageRef, index: int) -> Image.Image:
    """Decode one image (JPEG bytes or a path) to RGB; a bad one raises ``BadInput`` naming it."""
    try:
        im = Image.open(io.BytesIO(ref) if isinstance(ref, bytes | bytearray) else Path(ref))
        keep = False
        try:
            im.load()  # also closes a file it opened, for a single-frame image
            if im.mode == "RGB" and getattr(im, "n_frames", 1) == 1:  # convert() would copy it once more
                keep = True
                return im
            return im.convert("RGB")
        finally:
            if not keep:
                im.close()
    except Exception as e:
        # Whatever PIL raises reading the image: corrupt files raise more than OSError and
        # ValueError (fuzzing Pillow 13: SyntaxError for a broken PNG chunk, TypeError for a TIFF
        # without dimensions), and any of them escaping would fail the whole call, not the request.
        raise unreadable(ref, index, e) from e


def unreadable(ref: ImageRef, index: int, cause: BaseException) -> BadInput:
    """The one-line failure of an image whose file or pixels cannot be read."""
    return BadInput(f"{describe(ref, index)}: not a readable image ({type(cause).__name__})")


def decode(refs: Sequence[ImageRef], rule: ResizeRule, first: int = 0) -> list[np.ndarray]:
    """Each image decoded and resized, (H, W, 3) uint8; ``first``: the index of ``refs[0]`` in
    its request (for messages). Runs in worker processes too."""
    out = []
    for k, ref in enumerate(refs):
        im = load_image(ref, first + k)
        try:
            h, w = rule.size(im.height, im.width)
        except ValueError as e:
            raise BadInput(f"{describe(ref, first + k)}: {e}") from None
        try:
            if (h, w) != (im.height, im.width):
                im = im.resize((w, h), resample=Image.Resampling(rule.resample))
            out.append(np.asarray(im, np.uint8))
        except Exception as e:
            # A file that opened but whose pixels cannot be read or resized (truncated data, a
            # mode PIL cannot convert): that image's failure, never the whole call's.
            raise unreadable(ref, first + k, e) from e
    return out


Work = Callable[[Sequence[ImageRef], ResizeRule, int], list[np.ndarray]]  # ``decode``'s shape


# Free space /dev/shm must have for workers to hand frames over in shared memory: a block over
# its limit is not refused but faults (SIGBUS) when written, so a small one (containers often
# give 64 MiB) keeps the pipe. Blocks in flight are a few requests' frames (tens of MB).
SHARED_ROOM = 1 << 30


@dataclass(frozen=True, slots=True)
class SharedFrames:
    """Frames a worker left in one shared-memory block, each as (shape, dtype) in order: all that
    travels back through the pool's pipe. The engine's process copies them out and removes the
    block (``take``), or removes it unread (``remove_block``). The block is known to the resource
    tracker the pool's workers share with the engine's process, which removes what is left if
    that process dies."""

    name: str
    layout: tuple[tuple[tuple[int, ...], str], ...]

    def take(self) -> list[np.ndarray]:
        block = shared_memory.SharedMemory(name=self.name)
        try:
            out, at = [], 0
            for shape, dtype in self.layout:
                # A copy: no view of the block may outlive it (closing refuses exported buffers).
                out.append(np.ndarray(shape, np.dtype(dtype), buffer=block.buf, offset=at).copy())
                at += math.prod(shape) * np.dtype(dtype).itemsize
            return out
        finally:
            block.close()
            block.unlink()


def remove_block(name: str) -> None:
    """The block ``name`` removed if it exists (through the tracker: attach, then unlink)."""
    with contextlib.suppress(FileNotFoundError):
        block = shared_memory.SharedMemory(name=name)
        block.close()
        block.unlink()


def in_shared_memory(work: Work, refs: Sequence[ImageRef], rule: ResizeRule, first: int,
                     name: str) -> SharedFrames | list[np.ndarray]:
    """In a worker: ``work``'s frames, left in a new shared-memory block named ``name`` (the
    engine names it, so it can remove it whatever becomes of this worker); the frames themselves
    where /dev/shm cannot hold the block now (it is reserved first: a write past tmpfs's limit
    would kill the worker with SIGBUS)."""
    frames = work(refs, rule, first)
    size = max(1, sum(f.nbytes for f in frames))
    block = shared_memory.SharedMemory(name=name, create=True, size=size)
    try:  # the mapping is closed in the end either way; the block itself stays only if handed over
        fd = getattr(block, "_fd", -1)
        if fd >= 0 and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError:
                block.unlink()
                return frames
        at = 0
        for f in frames:
            np.ndarray(f.shape, f.dtype, buffer=block.buf, offset=at)[...] = f
            at += f.nbytes
        return SharedFrames(block.name, tuple((tuple(f.shape), f.dtype.str) for f in frames))
    except BaseException:
        block.unlink()
        raise
    finally:
        block.close()


def shared_room(path: str = "/dev/shm") -> bool:
    """Whether ``path`` (POSIX shared memory's file system) has ``SHARED_ROOM`` free."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):  # no such file system; no statvfs (Windows)
        return False
    return st.f_bavail * st.f_frsize >= SHARED_ROOM


def _remover(name: str) -> Callable[[Future[Any]], None]:
    """A done callback that removes the block ``name`` (concurrent.futures logs what it raises)."""
    return lambda _: remove_block(name)


def _block_name() -> str:
    """A new block's name: this process's, unique, short (macOS allows 31 characters)."""
    return f"bc{os.getpid()}_{uuid.uuid4().hex[:12]}"


class _PoolFailed(Exception):
    """The pool, not the work, failed a request's task (``FrameDecoder._in``)."""


def _worker_started() -> None:
    """In each worker: Ctrl-C is the engine process's to handle (a worker would print a traceback
    for it), and no secret-named or judge variable stays in the worker's environment."""
    from benchcheck.masking import drop_secret_variables

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    drop_secret_variables()


class FrameDecoder:
    """A request's images decoded in ``processes`` worker processes (0: in the calling thread),
    at most ``piece`` images per task, so one request's frames decode in parallel.

    What the work raises in a live worker (``BadInput`` for a bad image) fails its request as it
    would in the thread, and the pool stays. A pool whose worker dies is replaced, and the
    request tried once more in the new one; if that worker dies too, the request fails
    (``BadInput``): an image that kills its decoder must not be decoded in the engine's own
    process. A pool none of whose workers ever ran a task (they cannot start, e.g. a script
    without ``if __name__ == "__main__":``, which spawned workers import) turns worker decoding
    off, with a warning, and decodes in the thread. Changing ``processes`` replaces the pool;
    after ``close`` everything decodes in the thread.
    """

    def __init__(self, rule: ResizeRule, processes: int = 0, piece: int = 8, work: Work = decode,
                 shared: bool = True) -> None:
        self.rule = rule
        # Frames handed back in shared memory (``SharedFrames``) where /dev/shm has room.
        self.shared = shared and shared_room()
        self.piece = max(1, piece)
        self._work = work  # a module-level function (it travels to the workers by name)
        self._processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._worked = False  # some pool's worker ran a task: workers can start
        self._closed = False
        self._guard = threading.Lock()

    @property
    def processes(self) -> int:
        return self._processes

    @processes.setter
    def processes(self, n: int) -> None:
        with self._guard:
            changed, self._processes = n != self._processes, n
            pool = self._pool if changed else None
            if changed:
                self._pool = None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def frames(self, refs: Sequence[ImageRef]) -> list[np.ndarray]:
        """The frames of ``refs`` in order; ``BadInput`` names the first image that fails."""
        pool = self._started()
        if pool is None or not refs:
            return self._work(refs, self.rule, 0)
        for attempt in (1, 2):
            try:
                return self._in(pool, refs)
            except _PoolFailed:
                self._replace(pool)
            if attempt == 1:
                pool = self._started()
                if pool is None:  # closed, or turned off meanwhile
                    return self._work(refs, self.rule, 0)
        if not self._worked:
            log.warning("image decoding worker processes could not start; decoding in threads instead "
                        "(a script that builds the engine needs an `if __name__ == \"__main__\":` guard)")
            self.processes = 0
            return self._work(refs, self.rule, 0)
        raise BadInput(f"images 0-{len(refs) - 1} ({len(refs)}): their decoding worker process died, twice")

    def _in(self, pool: ProcessPoolExecutor, refs: Sequence[ImageRef]) -> list[np.ndarray]:
        """The frames decoded in ``pool``; ``_PoolFailed`` when the pool, not the work, failed.

        The pool fails a task where ``submit`` refuses it (``RuntimeError``: shut down meanwhile
        by another thread, ``BrokenProcessPool`` among them: broken; ``OSError``: no worker could
        be spawned) or ``result`` raises ``BrokenProcessPool`` (a worker died) or
        ``CancelledError`` (another thread shut the pool down). Anything else ``result`` raises,
        the work raised in a live worker (concurrent.futures re-raises the worker's exception):
        the request's own failure, whatever its type.
        """
        futures: list[Future[list[np.ndarray] | SharedFrames]] = []
        names: list[str] = []  # each piece's block (shared memory)
        taken = 0  # pieces whose frames are out (their blocks removed)
        try:
            try:
                for i in range(0, len(refs), self.piece):
                    piece = list(refs[i : i + self.piece])
                    if self.shared:
                        names.append(_block_name())
                        futures.append(pool.submit(in_shared_memory, self._work, piece, self.rule, i, names[-1]))
                    else:
                        futures.append(pool.submit(self._work, piece, self.rule, i))
            except (RuntimeError, OSError) as e:
                raise _PoolFailed from e
            out: list[np.ndarray] = []
            for f in futures:
                try:
                    part = f.result()
                except (BrokenProcessPool, CancelledError) as e:
                    raise _PoolFailed from e
                except Exception:
                    self._worked = True  # a worker ran the work: workers can start
                    raise
                try:
                    out.extend(part.take() if isinstance(part, SharedFrames) else part)
                except OSError as e:  # the block is gone (removed from outside): try the request again
                    raise _PoolFailed from e
                taken += 1
            self._worked = True
            return out
        finally:
            # After a failure the rest of this request's pieces are not needed. Each block not
            # taken is removed once its task is over, however it ended (a worker that died may
            # have made its block; a worker killed with a broken pool, another's).
            for k, f in enumerate(futures[taken:], start=taken):
                f.cancel()
                if names:
                    f.add_done_callback(_remover(names[k]))

    def _started(self) -> ProcessPoolExecutor | None:
        with self._guard:
            if self._closed or self._processes <= 0:
                return None
            if self._pool is None:
                self._pool = process_pool(self._processes, _worker_started)
            return self._pool

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        with self._guard:
            if self._pool is broken:
                self._pool = None
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._guard:
            pool, self._pool, self._closed = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
