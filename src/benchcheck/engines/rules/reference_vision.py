"""What the reference engine sees in a frame: named colours' areas and centroids, and tiny
bright marks, measured at the resolution the frame was received at (pure numpy).

The engine knows what colour words look like (a fixed RGB per name, as a person knows what
"red" looks like); it does not know where anything is nor what an item is about.
"""

from __future__ import annotations

import hashlib
import io
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

# Colour words the engine can see, and what they look like.
COLOUR_RGB: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (50, 80, 235),
    "yellow": (240, 220, 40),
    "magenta": (225, 50, 205),
    "cyan": (40, 215, 225),
    "orange": (250, 140, 20),
    "purple": (135, 55, 195),
}
COLOUR_TOLERANCE = 60.0  # RGB distance within which a pixel shows a colour
PRESENT_AREA = 0.002  # share of a frame a colour must cover to count as present
MARK_CONTRAST = 0.6  # a tiny mark: a near-white pixel this far from the background towards white
MAX_MARK_PIXELS = 64  # more than this many bright pixels is not a tiny mark
SAMPLE_STRIDE = 4
COLOUR_ROWS = 56
MARK_MAX_TINT = 60  # channel spread of a grey-white pixel
MARK_RING = 3  # a mark's pixels have background this many pixels away on every side
MARK_DARK = 60
CACHE_FRAMES = 4096  # measured frames kept (steps and items share frames)


@dataclass(frozen=True, slots=True)
class FrameFacts:
    """One frame's measurements."""

    width: int
    height: int
    area: dict[str, float]  # colour -> share of the frame
    centroid: dict[str, tuple[float, float]]  # colour -> (x, y) as shares of width and height
    mark: tuple[float, float] | None  # the tiny bright mark's (x, y) shares, if one is resolved


def decode(image: bytes | Path) -> npt.NDArray[np.uint8]:
    from PIL import Image

    data = image.read_bytes() if isinstance(image, Path) else image
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


_NAMES = list(COLOUR_RGB)
_RGB = np.asarray([COLOUR_RGB[n] for n in _NAMES], dtype=np.int32)


def _colours(rgb: npt.NDArray[np.uint8]) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    # Colour areas on a sparse grid (about COLOUR_ROWS rows): large shapes need no full resolution.
    stride = max(1, rgb.shape[0] // COLOUR_ROWS)
    small = rgb[::stride, ::stride].astype(np.int32)
    h, w = small.shape[:2]
    dist = ((small[:, :, None, :] - _RGB[None, None, :, :]) ** 2).sum(axis=3)
    nearest = dist.argmin(axis=2)
    nearest[dist.min(axis=2) > COLOUR_TOLERANCE**2] = -1
    counts = np.bincount(nearest.ravel() + 1, minlength=len(_NAMES) + 1)[1:]
    area: dict[str, float] = {}
    centroid: dict[str, tuple[float, float]] = {}
    total = float(h * w)
    for k, name in enumerate(_NAMES):
        if counts[k] / total >= PRESENT_AREA:
            ys, xs = np.nonzero(nearest == k)
            area[name] = float(counts[k]) / total
            centroid[name] = (float(xs.mean() + 0.5) / w, float(ys.mean() + 0.5) / h)
    return area, centroid


def _mark(rgb: npt.NDArray[np.uint8]) -> tuple[float, float] | None:
    """A tiny near-white mark: grey-white pixels whose darkest channel is far above the
    background's, with dark surroundings (a shape's desaturated edge is not a mark)."""
    low = np.minimum(np.minimum(rgb[:, :, 0], rgb[:, :, 1]), rgb[:, :, 2])
    high = np.maximum(np.maximum(rgb[:, :, 0], rgb[:, :, 1]), rgb[:, :, 2])
    bg = float(np.median(low[::SAMPLE_STRIDE, ::SAMPLE_STRIDE]))
    bg_high = float(np.median(high[::SAMPLE_STRIDE, ::SAMPLE_STRIDE]))
    if bg >= 250:
        return None
    ys, xs = np.nonzero(low >= math.ceil(bg + MARK_CONTRAST * (255.0 - bg)))
    if len(xs) == 0 or len(xs) > MAX_MARK_PIXELS:
        return None
    h, w = low.shape
    keep = []
    for y, x in zip(ys.tolist(), xs.tolist(), strict=True):
        if int(high[y, x]) - int(low[y, x]) > MARK_MAX_TINT:
            continue
        ring = [(y + dy, x + dx) for dy, dx in ((-MARK_RING, 0), (MARK_RING, 0), (0, -MARK_RING), (0, MARK_RING))]
        if all(0 <= v < h and 0 <= u < w and high[v, u] < bg_high + MARK_DARK for v, u in ring):
            keep.append((x, y))
    if not keep:
        return None
    return (sum(x for x, _ in keep) / len(keep) + 0.5) / w, (sum(y for _, y in keep) / len(keep) + 0.5) / h


def measure(image: bytes | Path) -> FrameFacts:
    """One frame's facts, measured afresh."""
    rgb = decode(image)
    area, centroid = _colours(rgb)
    return FrameFacts(rgb.shape[1], rgb.shape[0], area, centroid, _mark(rgb))


_CACHE: OrderedDict[bytes, FrameFacts] = OrderedDict()
_LOCK = threading.Lock()


def frame_facts(image: bytes | Path) -> FrameFacts:
    """One frame's facts, remembered by the digest of its bytes: the screening steps and the items
    of one video send the same frames again and again. A pure function of the bytes, so the
    cache never changes an answer."""
    data = image.read_bytes() if isinstance(image, Path) else image
    key = hashlib.blake2b(data, digest_size=16).digest()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    facts = measure(data)
    with _LOCK:
        _CACHE[key] = facts
        while len(_CACHE) > CACHE_FRAMES:
            _CACHE.popitem(last=False)
    return facts
