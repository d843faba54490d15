"""Decoded frames kept for the next requests that name the same images (the ``hf`` engine).

A video's questions name the same frames (steps 2, 3 and 6), and ``benchcheck screen`` sends
them to the engine together (``screen.task.call_order``). The prefix planner then runs those
frames through the vision tower once (``schedule.families``), but without this memo every question
still decoded and resized its own copy on the host: 32 JPEGs, ~35 ms of a core, for each of a
video's ~10 questions. Here the first request of a set decodes it, and the others wait for that
result and take the same arrays (read-only), which also lets the planner see at once that their
frames are equal (``schedule.families._same_frames`` tests identity first).

What counts as "the same images": bytes by their content (a digest), and a file by its path
together with its device, inode, size, modification and change times as ``os.stat`` gives them,
so a file rewritten between requests is decoded again. The memo holds the most recently used
sets up to ``capacity`` bytes of frames. A set that fails to decode is not kept: the requests
that waited for it get the same ``BadInput`` (a failure of the images), or decode it themselves
(any other failure of the decoding thread).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import numpy as np

from benchcheck.engines.base import ImageRef
from benchcheck.engines.hf.inputs.decode import BadInput

CAPACITY = 64 << 20  # bytes of decoded frames kept: 6 sets of 32 448x256 frames, 195 single frames

Decode = Callable[[Sequence[ImageRef]], list[np.ndarray]]


def images_key(images: Sequence[ImageRef]) -> bytes:
    """A digest of the images a request names (file paths as given, bytes by their content), in
    order: the questions asked of one video's frames get one key. Cheap next to decoding (bytes
    are hashed outside Python's lock; a path is not read). The prefix planner orders by it
    (``EncodedPrompt.frames_key``): the same frames named otherwise (a path and its bytes) get
    other keys and are planned apart, never wrongly shared."""
    h = hashlib.blake2b(digest_size=16)
    for ref in images:
        if isinstance(ref, bytes):
            h.update(b"b" + hashlib.blake2b(ref, digest_size=16).digest())
        else:
            h.update(b"p" + os.fsencode(ref) + b"\0")
    return h.digest()


def memo_key(images: Sequence[ImageRef], named: bytes | None = None) -> bytes | None:
    """What identifies the decoded frames of ``images`` (``named``: their ``images_key``, where
    the caller has it): the images' key itself when they are all bytes; with files, also each
    file's state. None when a file cannot be looked at (its decoding then fails, or succeeds, on
    its own, unremembered)."""
    named = images_key(images) if named is None else named
    paths = [ref for ref in images if not isinstance(ref, bytes)]
    if not paths:
        return named
    h = hashlib.blake2b(named, digest_size=20)
    for ref in paths:
        try:
            st = os.stat(ref)
        except (OSError, ValueError, TypeError):  # missing, unreadable, a NUL in the path: decoding names it
            return None
        # The change time moves with every write and cannot be set back (a modification time can).
        h.update(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\0".encode())
    return h.digest()


class FrameMemo:
    """The decoded frames of recent image sets, shared by the requests naming them; thread-safe,
    and a set being decoded is decoded once however many threads ask for it meanwhile."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.decoded = 0  # sets decoded (a request served from the memo does not count)
        self._kept: OrderedDict[bytes, tuple[list[np.ndarray], int]] = OrderedDict()
        self._pending: dict[bytes, Future[list[np.ndarray]]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._capacity = capacity

    @property
    def capacity(self) -> int:
        """Bytes of frames kept at most (0: nothing is remembered)."""
        return self._capacity

    @capacity.setter
    def capacity(self, n: int) -> None:
        with self._lock:
            self._capacity = n
            self._trim()

    def frames(self, images: Sequence[ImageRef], decode: Decode, named: bytes | None = None) -> list[np.ndarray]:
        """``decode(images)``, or the frames an earlier request naming the same images got
        (``named``: their ``images_key``, where the caller has it)."""
        key = memo_key(images, named) if images and self._capacity > 0 else None
        if key is None:
            return decode(images)
        mine: Future[list[np.ndarray]] = Future()
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None:
                self._kept.move_to_end(key)
                return list(hit[0])
            waiting = self._pending.setdefault(key, mine)
        if waiting is not mine:
            try:
                return list(waiting.result())  # the decoding thread's frames
            except BadInput as e:  # the images' own failure: the same for this request
                raise BadInput(str(e)) from None
            except Exception:  # not about the images (out of memory in the decoding thread...): decode here
                return decode(images)
        try:
            out = decode(images)
            for f in out:
                f.flags.writeable = False  # shared by every request naming them
            with self._lock:
                self.decoded += 1
                self._keep(key, out)
            mine.set_result(out)
            return list(out)
        except BaseException as e:
            if not mine.done():
                mine.set_exception(e)
            raise
        finally:
            with self._lock:
                if self._pending.get(key) is mine:
                    del self._pending[key]

    def clear(self) -> None:
        """Forget every kept set (sets being decoded finish as usual)."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0

    def _keep(self, key: bytes, frames: list[np.ndarray]) -> None:
        size = sum(f.nbytes for f in frames)
        if size > self._capacity:
            return
        self._kept[key] = (frames, size)
        self._bytes += size
        self._trim()

    def _trim(self) -> None:
        while self._bytes > self._capacity and self._kept:
            _, (_, dropped) = self._kept.popitem(last=False)
            self._bytes -= dropped
