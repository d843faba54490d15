"""Helpers of the hf engine tests."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def make_jpeg(seed: int, w: int = 448, h: int = 256) -> bytes:
    """A real JPEG (q=85) of random smooth content."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // 8), max(1, w // 8), 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR).save(buf, "JPEG", quality=85)
    return buf.getvalue()
