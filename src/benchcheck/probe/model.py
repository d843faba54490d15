"""The per-fold model (scikit-learn logistic regression) and its out-of-fold probabilities.

Each option is one row (its features, is it the gold); a binary logistic regression is fitted on
the options of the other folds' items, and an item's option probabilities are the softmax of the
options' decision values within the item. Features are standardized with the training folds'
means and deviations only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

C_DEFAULT = 1.0
MAX_ITER = 100


@dataclass(frozen=True, slots=True)
class Design:
    """One benchmark's features: ``x[i, j]`` option j of item i, ``mask[i, j]`` whether it exists."""

    x: NDArray[np.float32]  # (n, kmax, F)
    mask: NDArray[np.bool_]  # (n, kmax)

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def k(self) -> NDArray[np.int64]:
        out: NDArray[np.int64] = self.mask.sum(axis=1).astype(np.int64)
        return out

    def subset(self, idx: NDArray[np.int64]) -> Design:
        return Design(self.x[idx], self.mask[idx])


def _fit(x: NDArray[np.float32], y: NDArray[np.bool_], c: float, seed: int) -> tuple[NDArray[np.float64], float]:
    from sklearn.exceptions import ConvergenceWarning  # type: ignore[import-untyped]
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

    lr = LogisticRegression(C=c, solver="newton-cholesky", max_iter=MAX_ITER, tol=1e-4, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a capped fit still scores; the test is out of fold
        lr.fit(x, y)
    return lr.coef_[0].astype(np.float64), float(lr.intercept_[0])


def softmax_masked(z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    z = np.where(mask, z, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.where(mask, np.exp(z), 0.0)
    out: NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return out


def oof_probs(design: Design, gold: NDArray[np.int64], folds: NDArray[np.int64], c: float = C_DEFAULT,
              seed: int = 0) -> NDArray[np.float64]:
    """``(n, kmax)`` out-of-fold option probabilities (0 at padded options)."""
    n, kmax = design.mask.shape
    target = np.zeros((n, kmax), dtype=bool)
    target[np.arange(n), gold] = True
    probs = np.zeros((n, kmax))
    for f in np.unique(folds):
        test = folds == f
        train = ~test
        if not train.any():
            probs[test] = design.mask[test] / design.mask[test].sum(axis=1, keepdims=True)
            continue
        rows = design.x[train][design.mask[train]]
        mean = rows.mean(axis=0)
        sd = rows.std(axis=0)
        sd[sd < 1e-9] = 1.0
        coef, b = _fit(((rows - mean) / sd).astype(np.float32), target[train][design.mask[train]], c, seed)
        z = ((design.x[test] - mean) / sd) @ coef + b
        probs[test] = softmax_masked(z, design.mask[test])
    return probs


def accuracy(probs: NDArray[np.float64], gold: NDArray[np.int64]) -> float:
    return float((probs.argmax(axis=1) == gold).mean()) if len(gold) else 0.0


def chance(design: Design) -> float:
    """The accuracy of a uniform guess: the mean of 1/k over the items."""
    return float((1.0 / design.k).mean()) if design.n else 0.0
