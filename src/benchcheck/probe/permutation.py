"""The permutation test of the probe's out-of-fold accuracy (labels shuffled within a benchmark).

Two nulls, each refitting the whole k-fold probe on relabelled items:

* ``uniform``: each item's gold redrawn uniformly among its options. Null hypothesis: nothing in
  the text or the positions says where the gold is. Its p-value is the headline: a position bias
  is a shortcut too.
* ``shuffle``: the golds permuted among the benchmark's items with the same number of options
  (the gold positions' distribution kept). Null: nothing beyond the positions' distribution is
  learnable from the text.

p = (1 + rounds with an accuracy >= the observed) / (1 + rounds): a valid p-value whatever the
number of rounds (its smallest value is 1 / (rounds + 1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from benchcheck.probe.model import Design, accuracy, oof_probs

NullKind = Literal["uniform", "shuffle"]


@dataclass(frozen=True, slots=True)
class PermutationTest:
    kind: NullKind
    rounds: int
    observed: float
    null_mean: float
    null_sd: float
    p_value: float


def relabel(design: Design, gold: NDArray[np.int64], kind: NullKind, rng: np.random.Generator) -> NDArray[np.int64]:
    k = design.k
    if kind == "uniform":
        return np.floor(rng.random(len(k)) * k).astype(np.int64)
    out = gold.copy()
    for kk in np.unique(k):
        idx = np.flatnonzero(k == kk)
        out[idx] = gold[rng.permutation(idx)]
    return out


def permutation_test(design: Design, gold: NDArray[np.int64], folds: NDArray[np.int64], observed: float,
                     rounds: int, kind: NullKind = "uniform", seed: int = 0, c: float = 1.0) -> PermutationTest:
    rng = np.random.default_rng([seed, 1 if kind == "uniform" else 2])
    accs = np.array([accuracy(oof_probs(design, g, folds, c, seed), g)
                     for g in (relabel(design, gold, kind, rng) for _ in range(rounds))])
    exceed = int((accs >= observed - 1e-12).sum())
    return PermutationTest(kind, rounds, observed, float(accs.mean()) if rounds else float("nan"),
                           float(accs.std()) if rounds else float("nan"), (1 + exceed) / (1 + rounds))
