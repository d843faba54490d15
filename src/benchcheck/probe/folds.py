"""k folds grouped by video (pure): all questions about one video sit in one fold, so the probe
is never tested on a video whose other questions it was trained on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


def group_folds(groups: Sequence[str], k: int, seed: int = 0) -> NDArray[np.int64]:
    """Fold index per item; groups are dealt largest first (ties in a seeded order) to the fold
    with the fewest items, so folds are as even as whole groups allow. With fewer groups than
    ``k``, there are as many folds as groups."""
    names, inverse, sizes = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True,
                                      return_counts=True)
    k = max(1, min(k, len(names)))
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.permutation(len(names)), -sizes))
    load = np.zeros(k, dtype=np.int64)
    fold_of = np.zeros(len(names), dtype=np.int64)
    for g in order:
        f = int(np.argmin(load))
        fold_of[g] = f
        load[f] += sizes[g]
    return fold_of[inverse].astype(np.int64)


def n_folds(folds: NDArray[np.int64]) -> int:
    return int(folds.max()) + 1 if len(folds) else 0
