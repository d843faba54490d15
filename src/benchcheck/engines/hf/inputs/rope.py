"""Qwen3-VL's M-RoPE positions of one prompt, in NumPy, when the prompt is encoded.

transformers numbers them per batch row in ``get_rope_index``: a Python loop over each row's
token-type runs with several small torch operations per image. Called on the launching thread
before every forward, that cost 68 / 42 ms per batch of 245 one-frame / 17 32-frame requests
on the dev VM, and each of those thousands of operations let go of Python's lock, which a busy
encoding thread could then hold for up to the interpreter's switch interval while the device
waited (H200, 2B 32 frames: 18.0-19.8 items/s before, 21.6-21.7 after; decision
017). A prompt's positions depend on that prompt alone, so
the encoding threads compute them once, here, and batching only lays them into rows.

The numbering (transformers 5.x, ``Qwen3VLModel.get_rope_index`` for images): text tokens
count on from the running position on all three axes; an image of grid (t, h, w) patches, merged
``merge`` x ``merge``, takes positions (start + t_i, start + h_i, start + w_i) over its
t x h/merge x w/merge tokens, and the running position then moves on by max(h, w) / merge.
"""

from __future__ import annotations

import numpy as np


def mrope_positions(types: np.ndarray, grids: np.ndarray | None, merge: int) -> np.ndarray:
    """(3, L) int64 M-RoPE (time, height, width) positions of one prompt whose token types are
    ``types`` (0 text, 1 image placeholder) and whose images, one per run of placeholders in
    order, have patch grids ``grids`` (n_images, 3). ``ValueError`` when the runs do not match
    the grids (transformers fails such a prompt too) or a token is a video placeholder."""
    n = int(types.shape[0])
    out = np.empty((3, n), np.int64)
    if n and int(types.max()) > 1:
        raise ValueError("video placeholder tokens: the engine numbers image and text tokens only")
    image = types != 0
    # Boundaries of the runs of equal type: [starts[k], ends[k]) is run k.
    change = np.flatnonzero(np.diff(types)) + 1
    starts = np.concatenate([[0], change]) if n else np.zeros(0, np.int64)
    ends = np.concatenate([change, [n]]) if n else np.zeros(0, np.int64)
    runs = [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)]
    n_images = sum(1 for s, _ in runs if image[s])
    if n_images != (0 if grids is None else len(grids)):
        raise ValueError(f"{n_images} image placeholder run(s) for {0 if grids is None else len(grids)} image grid(s)")
    pos, k = 0, 0
    for s, e in runs:
        if not image[s]:
            out[:, s:e] = pos + np.arange(e - s)
            pos += e - s
            continue
        assert grids is not None
        t, h, w = (int(x) for x in grids[k])
        k += 1
        gh, gw = h // merge, w // merge
        if e - s != t * gh * gw:
            raise ValueError(f"image {k - 1}: {e - s} placeholder tokens for a {t}x{gh}x{gw} token grid")
        tt, hh, ww = np.meshgrid(np.arange(t), np.arange(gh), np.arange(gw), indexing="ij")
        out[0, s:e] = pos + tt.reshape(-1)
        out[1, s:e] = pos + hh.reshape(-1)
        out[2, s:e] = pos + ww.reshape(-1)
        pos += max(h, w) // merge
    return out
