"""Images of a request -> resized RGB frames, in the calling thread or in worker processes.

The ``hf`` engine decodes each image as the model's PIL image processor would (PIL decode,
``smart_resize`` to multiples of the patch grid, the processor's resampling) and keeps it as
uint8; rescaling, normalizing and patchifying happen on the device (``hf_pixels``).

Why worker processes: decoding leaves Python's lock, but the rest of each image's handling
(PIL's Python-level file parsing, ``tobytes`` in 64 KiB pieces, the array copy) holds it, and
the thread that launches the device work needs that lock for every operation it queues. On an
H200 host two decoding threads made the 2B 32-frame batches that ran while they decoded take
1.5-2x their device time (docs/PERFORMANCE.md). Workers hold their own locks; the engine's
process only reads the finished arrays off a pipe. Workers are spawned, not forked (a forked
child would inherit the engine's threads and CUDA state), import only PIL and NumPy, and start
on the first request with images. A worker that dies takes no request with it: its requests
are decoded again in the calling thread and the pool is started afresh.
"""

from __future__ import annotations

import io
import math
import multiprocessing
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from benchcheck.engines.base import ImageRef

MAX_ASPECT = 200  # the processor refuses images more elongated than this


class BadInput(ValueError):
    """A request that can never be answered as given (unreadable image, placeholder in text)."""


@dataclass(frozen=True, slots=True)
class ResizeRule:
    """The processor's resize: sides to multiples of ``factor`` (patch size x spatial merge),
    the area within ``[min_pixels, max_pixels]``, PIL resampling ``resample``; None: as is."""

    factor: int | None
    min_pixels: int = 0
    max_pixels: int = 0
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
        if min(height, width) < 1 or max(height, width) / min(height, width) > MAX_ASPECT:
            raise ValueError(f"aspect ratio of {width}x{height} is over {MAX_ASPECT}")
        h, w = round(height / f) * f, round(width / f) * f
        if h * w > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h, w = max(f, math.floor(height / beta / f) * f), max(f, math.floor(width / beta / f) * f)
        elif h * w < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
        return h, w


def describe(ref: ImageRef, index: int) -> str:
    return f"image {index} ({ref})" if isinstance(ref, Path) else f"image {index} ({len(ref)} bytes)"


def load_image(ref: ImageRef, index: int) -> Image.Image:
    """Decode one image (JPEG bytes or a path) to RGB; a bad one raises ``BadInput`` naming it."""
    try:
        im = Image.open(io.BytesIO(ref) if isinstance(ref, bytes | bytearray) else Path(ref))
        keep = False
        try:
            im.load()  # also closes a file it opened, for a single-frame image
            if im.mode == "RGB":  # convert() would copy an RGB image once more
                keep = True
                return im
            return im.convert("RGB")
        finally:
            if not keep:
                im.close()
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise BadInput(f"{describe(ref, index)}: not a readable image ({type(e).__name__})") from e


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
        if (h, w) != (im.height, im.width):
            im = im.resize((w, h), resample=Image.Resampling(rule.resample))
        out.append(np.asarray(im, np.uint8))
    return out


class FrameDecoder:
    """A request's images decoded in ``processes`` worker processes (0: in the calling thread),
    at most ``piece`` images per task, so one request's frames decode in parallel."""

    def __init__(self, rule: ResizeRule, processes: int = 0, piece: int = 8) -> None:
        self.rule = rule
        self.processes = processes
        self.piece = max(1, piece)
        self._pool: ProcessPoolExecutor | None = None
        self._guard = threading.Lock()

    def frames(self, refs: Sequence[ImageRef]) -> list[np.ndarray]:
        """The frames of ``refs`` in order; ``BadInput`` names the first image that fails."""
        pool = self._started()
        if pool is None or not refs:
            return decode(refs, self.rule)
        pieces = range(0, len(refs), self.piece)
        try:
            futures: list[Future[list[np.ndarray]]] = [
                pool.submit(decode, list(refs[i : i + self.piece]), self.rule, i) for i in pieces
            ]
            out: list[np.ndarray] = []
            for f in futures:
                out.extend(f.result())
            return out
        except BrokenProcessPool:  # a worker died (killed, out of memory): this request here, a new pool next
            self._restart(pool)
            return decode(refs, self.rule)

    def _started(self) -> ProcessPoolExecutor | None:
        if self.processes <= 0:
            return None
        with self._guard:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"))
            return self._pool

    def _restart(self, broken: ProcessPoolExecutor) -> None:
        with self._guard:
            if self._pool is broken:
                self._pool = None
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._guard:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
