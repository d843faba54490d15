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


def variant(engine: object, *ops: str, **knobs: object) -> object:
    """``engine`` (an ``HFEngine``) with ``ops`` ("+varlen", "-share_prefixes") and knobs of its
    ``HFConfig`` changed: another engine on the same model (``HFEngine.with_config``)."""
    from dataclasses import replace

    cfg = engine.config  # type: ignore[attr-defined]
    return engine.with_config(replace(cfg.with_ops(*ops), **knobs))  # type: ignore[attr-defined]


def tree_ops(share: bool, tree: str, unpadded: bool = True) -> tuple[str, ...]:
    """The ops of a scoring layout: prefix sharing, the tree attention ("varlen" / "mask"), unpadded rows."""
    return (("+" if share else "-") + "share_prefixes", ("+" if tree == "varlen" else "-") + "varlen",
            ("+" if unpadded else "-") + "unpadded")
