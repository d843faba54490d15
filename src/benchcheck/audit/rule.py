"""The removal rule, parameterised by the gold answer and the threshold (for the null and the
threshold curves). At ``threshold = log 2`` it is ``protocol.decide_single`` /
``protocol.decide_permutations`` exactly (a test holds it to that); the margin and the pick come
from the protocol's own functions, so the rule is not written twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from benchcheck.protocol import LOG2, MIN_PERM_HITS, argmax_pos, gold_position, margin_of
from benchcheck.stats.source import Forwards

RULE_TEXT = ("single forward: removed when argmax == gold and margin > {t}; "
             "permutations: removed when >= 3 of 4 pick the gold letter and mean margin > {t}; "
             "margin = lp[gold] - mean(lp[others]), lp = top-20 letter log-probs floored at log(1e-6)")


def rule_text(threshold: float = LOG2) -> str:
    t = "log 2" if threshold == LOG2 else f"{threshold:g}"
    return RULE_TEXT.format(t=t)


def decision_stats(perms: Sequence[Sequence[int]], lps: Sequence[Sequence[float]], answer: int) -> tuple[int, float]:
    """(forwards whose pick is the gold letter, mean gold margin) when ``answer`` is the gold option."""
    hits = 0
    total = 0.0
    for perm, lp in zip(perms, lps, strict=True):
        g = gold_position(perm, answer)
        hits += argmax_pos(lp) == g
        total += margin_of(lp, g)
    return hits, total / len(lps)


def removes(perms: Sequence[Sequence[int]], lps: Sequence[Sequence[float]], answer: int,
            threshold: float = LOG2) -> bool:
    """The protocol's rule for these forwards with ``answer`` as the gold option."""
    hits, mean_margin = decision_stats(perms, lps, answer)
    need = MIN_PERM_HITS if len(lps) > 1 else 1
    return hits >= need and mean_margin > threshold


def decision_tables(perms: np.ndarray, lps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every item of a batch and every possible gold option: whether enough forwards pick it
    (the hits condition) and its mean margin, both (items, k); ``removal_tables`` thresholds them."""
    _, n_fwd, k = lps.shape
    pos = np.argsort(perms, axis=2)  # pos[i, f, a] = where option a stands in forward f
    at = np.take_along_axis(lps, pos, axis=2)  # the log-prob of option a in forward f
    margins = at - (lps.sum(axis=2, keepdims=True) - at) / (k - 1)
    hits = lps.argmax(axis=2)[:, :, None] == pos
    need = MIN_PERM_HITS if n_fwd > 1 else 1
    ok: np.ndarray = hits.sum(axis=1) >= need
    mean: np.ndarray = margins.mean(axis=1)
    return ok, mean


def removal_tables(perms: np.ndarray, lps: np.ndarray, threshold: float = LOG2) -> np.ndarray:
    """``removes`` for every item of a batch and every possible gold option at once.

    ``perms`` and ``lps`` are (items, forwards, k); returns (items, k) booleans: entry [i, a] is
    ``removes(perms[i], lps[i], a, threshold)`` (a test holds the two equal). The pick is the
    first index of the maximum, as ``protocol.argmax_pos``; the margin is ``protocol.margin_of``'s.
    """
    ok, mean = decision_tables(perms, lps)
    out: np.ndarray = ok & (mean > threshold)
    return out


def group_decisions(group: Sequence[Forwards]) -> tuple[np.ndarray, np.ndarray]:
    """``decision_tables`` of items with the same k, batched by their number of forwards."""
    ok = np.zeros((len(group), group[0].k), dtype=bool)
    mean = np.zeros((len(group), group[0].k))
    by_n: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(group):
        by_n[len(f.lps)].append(i)
    for idx in by_n.values():
        perms = np.array([group[i].perms for i in idx], dtype=np.int64)
        lps = np.array([group[i].lps for i in idx], dtype=np.float64)
        ok[idx], mean[idx] = decision_tables(perms, lps)
    return ok, mean


def group_tables(group: Sequence[Forwards], threshold: float = LOG2) -> np.ndarray:
    """The removal table of items with the same k (``removal_tables`` over ``group_decisions``)."""
    ok, mean = group_decisions(group)
    out: np.ndarray = ok & (mean > threshold)
    return out


def item_tables(rows: Sequence[Forwards], threshold: float = LOG2) -> dict[str, np.ndarray]:
    """item_id -> which gold options the rule would remove it for (``rule.removal_tables``)."""
    by_k: dict[int, list[Forwards]] = defaultdict(list)
    for f in rows:
        by_k[f.k].append(f)
    out: dict[str, np.ndarray] = {}
    for group in by_k.values():
        for f, t in zip(group, group_tables(group, threshold), strict=True):
            out[f.item_id] = t
    return out
