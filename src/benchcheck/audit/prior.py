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

from benchcheck.audit.rule import decision_stats, removes
from benchcheck.audit.source import Forwards
from benchcheck.protocol import LETTERS, LOG2, argmax_pos, gold_position

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
    """One prior per (model, step, k) from every forward of the rows given."""
    acc: dict[PriorKey, list[float]] = {}
    picks: dict[PriorKey, list[int]] = {}
    n: dict[PriorKey, int] = defaultdict(int)
    for f in forwards:
        key = (f.model, f.step, f.k)
        a = acc.setdefault(key, [0.0] * f.k)
        c = picks.setdefault(key, [0] * f.k)
        for lp in f.lps:
            mean = sum(lp) / len(lp)
            for i, v in enumerate(lp):
                a[i] += v - mean
            c[argmax_pos(lp)] += 1
            n[key] += 1
    return {key: LetterPrior(key[0], key[1], key[2], tuple(softmax([v / n[key] for v in a])), tuple(picks[key]), n[key],
                             "permutations" if _multi(forwards, key) else "all items")
            for key, a in acc.items()}


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
    """A removal the prior alone explains: every forward that picked the gold letter picked the
    model's dominant position, and the mean margin exceeds what the prior gives the gold
    positions by no more than the rule's own threshold (log 2)."""
    if not f.removed:
        return False
    golds = [gold_position(p, f.answer) for p in f.perms]
    for lp, g in zip(f.lps, golds, strict=True):
        if argmax_pos(lp) == g and g != prior.dominant:
            return False
    _, mean_margin = decision_stats(f.perms, f.lps, f.answer)
    mean_prior = sum(prior.margin_at(g) for g in golds) / len(golds)
    return mean_margin - mean_prior <= LOG2
