"""The model's letter prior per model and step, and what it explains (PriDe-style correction).

The prior over answer positions is the mean of the centred letter log-probs (each forward's
``lp_j - mean(lp)``) over every forward of a step, normalised: for step 1 that pools the four
permutations, which move every option over the positions; over the items of a single-forward
step, an item's content adds as much to a position when its gold stands there as it takes away
when it does not, so with balanced gold positions it averages out (in log space; a mean of
softmax probabilities would not). The margin is linear in the log-probs, so this is the prior
the margin sees. Beside it, the pick frequencies. Correcting a
forward subtracts the prior's log-probabilities from its letters' (Zheng et al., "Large Language
Models Are Not Robust Multiple Choice Selectors", PriDe); the margin is shift-invariant, so no
renormalisation is needed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.rule import removes
from benchcheck.audit.source import Forwards
from benchcheck.protocol import LETTERS, argmax_pos, gold_position

PriorKey = tuple[str, int, int]  # (model, step, number of options)


@dataclass(frozen=True, slots=True)
class LetterPrior:
    model: str
    step: int
    k: int
    probs: tuple[float, ...]  # softmax of the mean centred log-probs, per position
    picks: tuple[int, ...]  # argmax counts per position
    forwards: int
    source: str  # "permutations" (step 1) or "all items"

    @property
    def dominant(self) -> int:
        return argmax_pos(self.probs)

    @property
    def log_probs(self) -> tuple[float, ...]:
        return tuple(math.log(max(p, 1e-12)) for p in self.probs)

    def margin_at(self, pos: int) -> float:
        """The margin the prior alone gives a gold letter at ``pos``."""
        lp = self.log_probs
        others = [v for i, v in enumerate(lp) if i != pos]
        return lp[pos] - sum(others) / len(others)

    def record(self) -> dict[str, object]:
        out: dict[str, object] = {"model": self.model, "step": self.step, "k": self.k, "source": self.source,
                                  "forwards": self.forwards, "dominant": LETTERS[self.dominant]}
        for i, (p, c) in enumerate(zip(self.probs, self.picks, strict=True)):
            out[f"p_{LETTERS[i]}"] = round(p, 4)
            out[f"pick_{LETTERS[i]}"] = round(c / self.forwards, 4) if self.forwards else None
        out["dominant_margin"] = round(self.margin_at(self.dominant), 4)
        return out


def softmax(lp: Sequence[float]) -> list[float]:
    m = max(lp)
    e = [math.exp(v - m) for v in lp]
    s = sum(e)
    return [v / s for v in e]


def estimate_priors(forwards: Sequence[Forwards]) -> dict[PriorKey, LetterPrior]:
    """One prior per (model, step, k) from every forward of the rows given.

    A model that sees the answer adds to the gold's letter, and which items reach a later step
    depends on what earlier steps removed (often by position), so the gold letters carry the
    answers, not the prior. With three or more options the prior is therefore fitted to the
    letters that are not the gold: in each forward the non-gold letters centred on their own
    mean, least squares over all forwards (``_non_gold_fit``). With two options (one non-gold
    letter: nothing to centre) or golds all at one position (the gold's own position is then not
    identified), it is the mean of the centred log-probs within each gold position, averaged
    over the gold positions present."""
    sums: dict[PriorKey, dict[int, np.ndarray]] = {}
    per_gold: dict[PriorKey, dict[int, int]] = {}
    picks: dict[PriorKey, list[int]] = {}
    n: dict[PriorKey, int] = defaultdict(int)
    for f in forwards:
        key = (f.model, f.step, f.k)
        strata = sums.setdefault(key, {})
        counts = per_gold.setdefault(key, defaultdict(int))
        c = picks.setdefault(key, [0] * f.k)
        for perm, lp in zip(f.perms, f.lps, strict=True):
            g = gold_position(perm, f.answer)
            v = np.asarray(lp, dtype=np.float64)
            strata[g] = strata.get(g, np.zeros(f.k)) + (v - v.mean())
            counts[g] += 1
            c[argmax_pos(lp)] += 1
            n[key] += 1
    out = {}
    for key, strata in sums.items():
        centred = _non_gold_fit(key[2], strata, per_gold[key])
        if centred is None:
            centred = sum((s / per_gold[key][g] for g, s in strata.items()), np.zeros(key[2])) / len(strata)
        out[key] = LetterPrior(key[0], key[1], key[2], tuple(softmax([float(x) for x in centred])),
                               tuple(picks[key]), n[key], "permutations" if _multi(forwards, key) else "all items")
    return out


def _non_gold_fit(k: int, sums: dict[int, np.ndarray], counts: dict[int, int]) -> np.ndarray | None:
    """Least-squares prior (centred) from the non-gold letters, or None where not identified.

    A forward with gold at g gives, for each other position j, the equation
    ``lp_j - mean_{l != g} lp_l = pi_j - mean_{l != g} pi_l``; the rows of these equations are
    the centring projector P_g on the non-gold positions, so the normal equations are
    ``(sum_g n_g P_g) pi = sum_g P_g (sum of the forwards' lp)``: two k x k sums, whatever the
    number of forwards."""
    if k < 3 or len(sums) < 2:
        return None
    a = np.zeros((k, k))
    b = np.zeros(k)
    for g, s in sums.items():
        p = np.zeros((k, k))
        others = [i for i in range(k) if i != g]
        p[np.ix_(others, others)] = np.eye(k - 1) - 1.0 / (k - 1)
        a += counts[g] * p
        b += p @ s
    if np.linalg.matrix_rank(a) < k - 1:
        return None
    pi: np.ndarray = np.linalg.pinv(a) @ b  # the minimum-norm solution is the centred one
    return pi


def _multi(forwards: Sequence[Forwards], key: PriorKey) -> bool:
    return any(f.multi for f in forwards if (f.model, f.step, f.k) == key)


def corrected(f: Forwards, prior: LetterPrior) -> tuple[tuple[float, ...], ...]:
    """The forwards' letter log-probs with the prior's subtracted."""
    lp_prior = prior.log_probs
    return tuple(tuple(v - q for v, q in zip(lp, lp_prior, strict=True)) for lp in f.lps)


def corrected_removes(f: Forwards, prior: LetterPrior) -> bool:
    """The protocol's rule applied to the prior-corrected letters."""
    return removes(f.perms, corrected(f, prior), f.answer)


def prior_explained(f: Forwards, prior: LetterPrior) -> bool:
    """A removal the prior explains: the rule removes the item on the recorded letters but not on
    the letters with the prior subtracted (the PriDe-corrected ones), so the prior's share of
    the margin (or of the hits) is what carries it over the threshold. Subtracting the prior
    only helps a gold letter away from the dominant position, so such a removal always rests on
    forwards that put the gold at the dominant position. (The first version asked, instead, that
    every hit be at the dominant position and that the mean margin exceed the prior's by no more
    than log 2; on the demo's planted prior that missed removals whose hits the prior made, at a
    gold position it favours, beside one hit elsewhere.)"""
    return f.removed and not corrected_removes(f, prior)
