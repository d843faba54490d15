"""What the probe sees of an option (pure): hand-built text features and embedding features.

Every feature is computed per option *relative to the other options of its item* where that is
what a shortcut looks like (the longest option, the one most like the question, the odd one
out). The model scores options, not items, so one item's features are a ``(k, F)`` block; items
of a benchmark with fewer options than the most in it are padded and masked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

POSITIONS = 8  # one-hot position features for A..H; later positions share the last one
_WORD = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"^\s*[-+]?\d+([.,]\d+)?\s*\w{0,3}\s*$")

HAND_NAMES: tuple[str, ...] = (
    *(f"pos_{chr(65 + i)}" for i in range(POSITIONS)), "pos_last", "pos_frac",
    "len_log", "len_z", "len_rank", "is_longest", "is_shortest",
    "words_z", "overlap_q", "overlap_q_share", "is_max_overlap_q", "shared_with_options", "is_numeric",
)
EMB_NAMES: tuple[str, ...] = ("cos_q", "cos_q_z", "cos_others", "cos_others_z", "is_max_cos_q", "is_min_cos_others")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _z(v: NDArray[np.float64]) -> NDArray[np.float64]:
    sd = float(v.std())
    return (v - v.mean()) / sd if sd > 1e-9 else np.zeros_like(v)


def _is_max(v: NDArray[np.float64]) -> NDArray[np.float64]:
    """1 for the single largest value; ties give every tied option 0 (no unique winner)."""
    top = v.max()
    hits = np.isclose(v, top)
    return hits.astype(np.float64) if hits.sum() == 1 else np.zeros_like(v)


def hand_features(question: str, options: Sequence[str]) -> NDArray[np.float64]:
    """``(k, len(HAND_NAMES))``: position, length, word overlap with the question and the options."""
    k = len(options)
    out = np.zeros((k, len(HAND_NAMES)))
    qw = set(words(question))
    ow = [words(o) for o in options]
    length = np.array([len(o.strip()) for o in options], dtype=np.float64)
    nwords = np.array([len(w) for w in ow], dtype=np.float64)
    overlap = np.array([len(set(w) & qw) for w in ow], dtype=np.float64)
    share = np.array([len(set(w) & qw) / len(set(w)) if w else 0.0 for w in ow])
    shared = np.array([sum(1 for j, other in enumerate(ow) if j != i and set(w) & set(other))
                       for i, w in enumerate(ow)], dtype=np.float64) / max(k - 1, 1)
    order = length.argsort(kind="stable").argsort(kind="stable")
    for j in range(k):
        out[j, min(j, POSITIONS - 1)] = 1.0
    col = POSITIONS
    out[k - 1, col] = 1.0
    out[:, col + 1] = np.arange(k) / max(k - 1, 1)
    out[:, col + 2] = np.log1p(length)
    out[:, col + 3] = _z(length)
    out[:, col + 4] = order / max(k - 1, 1)
    out[:, col + 5] = _is_max(length)
    out[:, col + 6] = _is_max(-length)
    out[:, col + 7] = _z(nwords)
    out[:, col + 8] = overlap
    out[:, col + 9] = share
    out[:, col + 10] = _is_max(overlap) * (overlap > 0)
    out[:, col + 11] = shared
    out[:, col + 12] = [1.0 if _NUMBER.match(o) else 0.0 for o in options]
    return out


@dataclass(frozen=True, slots=True)
class Projection:
    """A fixed random projection of an option's embedding minus its item's mean (the option's
    own direction), so the linear model can learn which *kind* of answer tends to be right."""

    matrix: NDArray[np.float32]

    @classmethod
    def make(cls, dim_in: int, dim_out: int, seed: int = 0) -> Projection:
        rng = np.random.default_rng(seed)
        m = rng.standard_normal((dim_in, dim_out)).astype(np.float32) / np.float32(np.sqrt(max(dim_out, 1)))
        return cls(m)

    @property
    def dims(self) -> int:
        return int(self.matrix.shape[1])


def emb_names(proj: Projection | None) -> tuple[str, ...]:
    return EMB_NAMES + tuple(f"proj_{i}" for i in range(proj.dims if proj is not None else 0))


def embedding_features(q: NDArray[np.float32], opts: NDArray[np.float32],
                       proj: Projection | None) -> NDArray[np.float64]:
    """``(k, len(emb_names(proj)))`` from the question's and the options' L2-normalized embeddings."""
    k = opts.shape[0]
    cos_q = (opts @ q).astype(np.float64)
    total = opts.sum(axis=0)
    others = (total[None, :] - opts) / max(k - 1, 1)
    norms = np.linalg.norm(others, axis=1)
    cos_o = np.einsum("ij,ij->i", opts, others) / np.maximum(norms, 1e-9)
    cols = [cos_q, _z(cos_q), cos_o.astype(np.float64), _z(cos_o.astype(np.float64)), _is_max(cos_q),
            _is_max(-cos_o.astype(np.float64))]
    out = np.stack(cols, axis=1)
    if proj is not None and proj.dims:
        own = (opts - total[None, :] / k) @ proj.matrix
        out = np.concatenate([out, own.astype(np.float64)], axis=1)
    return out
