"""The model's letter prior per model and step, and what it explains (PriDe-style correction).

The prior is an additive effect of the position on every letter's log-prob. A model that sees the
answer adds to the gold's letter, and which items reach a later step depends on what earlier
steps removed (often by position), so the gold letters carry the answers, not the prior: the
prior is fitted to the **non-gold** letters alone, as a two-way model ``lp[f, j] = a_f + pi_j + e``
(a forward's own level ``a_f``, the position's prior ``pi_j``, residual ``e`` normal with one sd).

- **Floored letters are censored.** A letter missing from the top 20 was recorded as
  ``log(1e-6)``; its real value is only known to lie below the forward's lowest listed letter.
  The fit is the censored (Tobit) maximum likelihood by EM: the E-step replaces a floored letter
  by its expectation under the current fit given that bound, the M-step is the least-squares
  two-way fit (two k x k sums, ``_position_fit``). With no floored letter it is the plain
  least-squares fit in one step.
- **Identified positions only.** A position must be a non-gold letter in at least
  ``MIN_NONGOLD`` forwards; where golds all sit at one position (a single-forward step whose
  survivors all have gold A), that position's prior is not identified and is set to none
  (0, the mean of the identified ones) instead of taking the answers' signal for a prior.
- **Two options**: one non-gold letter per forward says nothing once ``a_f`` is removed, so the
  prior is the mean of the centred log-probs within each gold position, averaged over the two
  (a boost on the gold cancels between them); with one gold position present, none.

Its uncertainty is a sandwich covariance clustered by item (the permutations of one item share
its content), inflated by the share of censored letters. A removal's **probability that the
prior explains it** is the share of draws of the prior from that normal for which the rule no
longer removes the item on the letters with the prior subtracted (Zheng et al., "Large Language
Models Are Not Robust Multiple Choice Selectors", PriDe); the hard flag is that probability
> ``EXPLAINED_CUT``. The margin is shift-invariant, so no renormalisation is needed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.rule import removal_tables, removes
from benchcheck.protocol import LETTERS, LP_FLOOR, argmax_pos, gold_position
from benchcheck.stats.normal import mills_lower
from benchcheck.stats.source import Forwards

PriorKey = tuple[str, int, int]  # (model, step, number of options)

MIN_NONGOLD = 5  # forwards in which a position must be a non-gold letter for its prior to be identified
EXPLAINED_CUT = 0.5  # prior_explained (the flag) = prior_prob > this
PRIOR_DRAWS = 400
EM_ROUNDS = 200
_FLOORED = LP_FLOOR + 1e-9


@dataclass(frozen=True, slots=True)
class LetterPrior:
    model: str
    step: int
    k: int
    probs: tuple[float, ...]  # softmax of the fitted centred log prior, per position
    picks: tuple[int, ...]  # argmax counts per position
    forwards: int
    source: str  # "permutations" (step 1) or "all items"
    identified: tuple[bool, ...] = ()  # positions whose prior the rows identify (else set to none)
    cov: tuple[tuple[float, ...], ...] = ()  # covariance of the centred log prior
    noise_sd: float | None = None  # the non-gold letters' residual sd around the fit
    censored: int = 0  # non-gold letters at the floor, fitted as censored

    @property
    def dominant(self) -> int:
        return argmax_pos(self.probs)

    @property
    def log_probs(self) -> tuple[float, ...]:
        return tuple(math.log(max(p, 1e-300)) for p in self.probs)

    @property
    def centred(self) -> np.ndarray:
        lp = np.array(self.log_probs)
        out: np.ndarray = lp - lp.mean()
        return out

    def se(self) -> tuple[float, ...]:
        if not self.cov:
            return (0.0,) * self.k
        return tuple(math.sqrt(max(self.cov[i][i], 0.0)) for i in range(self.k))

    def margin_at(self, pos: int) -> float:
        """The margin the prior alone gives a gold letter at ``pos``."""
        lp = self.log_probs
        others = [v for i, v in enumerate(lp) if i != pos]
        return lp[pos] - sum(others) / len(others)

    def draws(self, n: int = PRIOR_DRAWS, seed: int = 0) -> np.ndarray:
        """``n`` centred log priors drawn from the fit's normal (n, k); the first is the fit itself."""
        centre = self.centred
        if not self.cov:
            return np.tile(centre, (n, 1))
        vals, vecs = np.linalg.eigh(np.array(self.cov))
        root = vecs * np.sqrt(np.clip(vals, 0.0, None))
        z = np.random.default_rng(seed).standard_normal((n, self.k))
        z[0] = 0.0
        out: np.ndarray = centre + z @ root.T
        return out

    def record(self) -> dict[str, object]:
        out: dict[str, object] = {"model": self.model, "step": self.step, "k": self.k, "source": self.source,
                                  "forwards": self.forwards, "dominant": LETTERS[self.dominant]}
        se = self.se()
        for i, (p, c) in enumerate(zip(self.probs, self.picks, strict=True)):
            out[f"p_{LETTERS[i]}"] = round(p, 4)
            out[f"pick_{LETTERS[i]}"] = round(c / self.forwards, 4) if self.forwards else None
        out["dominant_margin"] = round(self.margin_at(self.dominant), 4)
        for i in range(self.k):
            out[f"se_{LETTERS[i]}"] = round(se[i], 4)
        out["unidentified"] = "".join(LETTERS[i] for i, ok in enumerate(self.identified) if not ok)
        out["censored_letters"] = self.censored
        out["noise_sd"] = None if self.noise_sd is None else round(self.noise_sd, 4)
        return out


def softmax(lp: Sequence[float]) -> list[float]:
    m = max(lp)
    e = [math.exp(v - m) for v in lp]
    s = sum(e)
    return [v / s for v in e]


@dataclass(frozen=True, slots=True)
class _Fit:
    centred: np.ndarray
    identified: np.ndarray
    cov: np.ndarray | None
    noise_sd: float | None
    censored: int


def estimate_priors(forwards: Sequence[Forwards]) -> dict[PriorKey, LetterPrior]:
    """One prior per (model, step, k) from every forward of the rows given (module docstring)."""
    groups: dict[PriorKey, list[Forwards]] = defaultdict(list)
    for f in forwards:
        groups[(f.model, f.step, f.k)].append(f)
    out = {}
    for key, rows in groups.items():
        k = key[2]
        lps = np.array([lp for f in rows for lp in f.lps], dtype=np.float64)
        golds = np.array([gold_position(p, f.answer) for f in rows for p in f.perms], dtype=np.int64)
        cluster = np.array([i for i, f in enumerate(rows) for _ in f.lps], dtype=np.int64)
        picks = np.bincount(lps.argmax(axis=1), minlength=k)
        fit = fit_prior(lps, golds, cluster)
        cov = () if fit.cov is None else tuple(tuple(float(x) for x in r) for r in fit.cov)
        out[key] = LetterPrior(key[0], key[1], k, tuple(softmax([float(x) for x in fit.centred])),
                               tuple(int(c) for c in picks), len(lps),
                               "permutations" if any(f.multi for f in rows) else "all items",
                               tuple(bool(b) for b in fit.identified), cov, fit.noise_sd, fit.censored)
    return out


def fit_prior(lps: np.ndarray, golds: np.ndarray, cluster: np.ndarray) -> _Fit:
    """The centred log prior from forwards' letters ``lps`` (n, k), their gold positions and
    the cluster (item) of each forward."""
    n, k = lps.shape
    nongold = np.ones((n, k), dtype=bool)
    nongold[np.arange(n), golds] = False
    identified = nongold.sum(axis=0) >= MIN_NONGOLD
    if k == 2:
        return _two_option_fit(lps, golds, cluster)
    if identified.sum() < 2:
        return _Fit(np.zeros(k), identified, None, None, 0)
    active = nongold & identified[None, :]
    use = active.sum(axis=1) >= 2
    floored = lps <= _FLOORED
    use &= (~floored).any(axis=1)
    lps, golds, cluster, active, floored = lps[use], golds[use], cluster[use], active[use], floored[use]
    if len(lps) == 0:
        return _Fit(np.zeros(k), np.zeros(k, dtype=bool), None, None, 0)
    cens = floored & active
    obs = active & ~cens
    # a floored letter lies below the forward's lowest listed letter
    bound = np.where(~floored, lps, np.inf).min(axis=1)[:, None]
    y = np.where(active, lps, 0.0)
    y = np.where(cens, bound - 1.0, y)
    pi = np.zeros(k)
    sd = 1.0
    for _ in range(EM_ROUNDS if cens.any() else 1):
        pi_new, level = _position_fit(y, active, golds, identified)
        mu = level[:, None] + pi_new[None, :]
        r_obs = np.where(obs, lps - mu, 0.0)
        sq = float((r_obs**2).sum())
        if cens.any():
            z = (bound - mu) / sd
            lam = mills_lower(z)
            sq += float(np.where(cens, sd**2 * (1.0 - z * lam), 0.0).sum())
            sd = math.sqrt(max(sq / active.sum(), 1e-12))
            z = (bound - mu) / sd
            y = np.where(cens, mu - sd * mills_lower(z), y)
        else:
            sd = math.sqrt(sq / max(int(active.sum()) - len(lps) - int(identified.sum()) + 1, 1))
        done = float(np.abs(pi_new - pi).max()) < 1e-7
        pi = pi_new
        if done and cens.any():
            break
    pi_fit, level = _position_fit(y, active, golds, identified)
    resid = np.where(active, y - level[:, None] - pi_fit[None, :], 0.0)
    inflate = float(active.sum()) / max(float(obs.sum()), 1.0)
    cov = _sandwich(resid, active, golds, identified, cluster) * inflate
    return _Fit(pi_fit, identified, cov, sd, int(cens.sum()))


def _projector(k: int, members: np.ndarray) -> np.ndarray:
    """Centring on the positions in ``members`` (zero elsewhere)."""
    idx = np.flatnonzero(members)
    p = np.zeros((k, k))
    if len(idx) >= 2:
        p[np.ix_(idx, idx)] = np.eye(len(idx)) - 1.0 / len(idx)
    return p


def _normal_matrix(golds: np.ndarray, identified: np.ndarray, k: int) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    a = np.zeros((k, k))
    proj = {}
    for g in np.unique(golds):
        members = identified.copy()
        members[g] = False
        proj[int(g)] = _projector(k, members)
        a += int((golds == g).sum()) * proj[int(g)]
    return a, proj


def _position_fit(y: np.ndarray, active: np.ndarray, golds: np.ndarray,
                  identified: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least squares of ``y = a_f + pi_j`` over the active cells: a forward with gold at g gives
    its non-gold identified letters centred on their own mean = the prior centred the same way,
    i.e. ``P_g y_f = P_g pi``; the normal equations are ``(sum_g n_g P_g) pi = sum_g P_g (sum of
    y_f with gold g)``. Returns (pi centred on the identified positions, zero elsewhere; a_f)."""
    k = y.shape[1]
    a, proj = _normal_matrix(golds, identified, k)
    b = np.zeros(k)
    for g, p in proj.items():
        b += p @ y[golds == g].sum(axis=0)
    pi: np.ndarray = np.linalg.pinv(a) @ b
    pi = np.where(identified, pi - pi[identified].mean(), 0.0)
    level = np.where(active, y - pi[None, :], 0.0).sum(axis=1) / np.maximum(active.sum(axis=1), 1)
    return pi, level


def _sandwich(resid: np.ndarray, active: np.ndarray, golds: np.ndarray, identified: np.ndarray,
              cluster: np.ndarray) -> np.ndarray:
    """Cov(pi) = A^+ (sum over items of s_i s_i^T) A^+, s_i the item's summed score ``P_g r_f``."""
    k = resid.shape[1]
    a, proj = _normal_matrix(golds, identified, k)
    scores = np.zeros_like(resid)
    for g, p in proj.items():
        sel = golds == g
        scores[sel] = resid[sel] @ p.T
    _, inv = np.unique(cluster, return_inverse=True)
    per = np.zeros((int(inv.max()) + 1, k))
    np.add.at(per, inv, scores)
    bread = np.linalg.pinv(a)
    out: np.ndarray = bread @ (per.T @ per) @ bread
    return out


def _two_option_fit(lps: np.ndarray, golds: np.ndarray, cluster: np.ndarray) -> _Fit:
    """Two options: the mean centred log-probs within each gold position, averaged over both."""
    centred = lps - lps.mean(axis=1, keepdims=True)
    counts = np.bincount(golds, minlength=2)
    if (counts < MIN_NONGOLD).any():
        return _Fit(np.zeros(2), np.zeros(2, dtype=bool), None, None, 0)
    pi = np.zeros(2)
    var = 0.0
    resid_sq = 0.0
    for g in (0, 1):
        x = centred[golds == g, 0]
        c = cluster[golds == g]
        pi[0] += x.mean() / 2
        _, inv = np.unique(c, return_inverse=True)
        per = np.bincount(inv, weights=x - x.mean())
        var += float((per**2).sum()) / len(x) ** 2 / 4
        resid_sq += float(((x - x.mean()) ** 2).sum())
    pi[1] = -pi[0]
    cov = var * np.array([[1.0, -1.0], [-1.0, 1.0]])
    return _Fit(pi, np.ones(2, dtype=bool), cov, math.sqrt(resid_sq / len(lps) * 2), 0)


def corrected(f: Forwards, prior: LetterPrior) -> tuple[tuple[float, ...], ...]:
    """The forwards' letter log-probs with the prior's subtracted."""
    lp_prior = prior.log_probs
    return tuple(tuple(v - q for v, q in zip(lp, lp_prior, strict=True)) for lp in f.lps)


def corrected_removes(f: Forwards, prior: LetterPrior) -> bool:
    """The protocol's rule applied to the prior-corrected letters."""
    return removes(f.perms, corrected(f, prior), f.answer)


def prior_probability(f: Forwards, prior: LetterPrior, draws: np.ndarray | None = None) -> float | None:
    """P(the prior explains this removal): the share of the prior's draws (``LetterPrior.draws``)
    for which the rule no longer removes the item once the drawn prior is subtracted. None for
    a kept item (there is no removal to explain), and where a forward's gold position has no
    identified prior (the rows cannot tell a prior there from the answers)."""
    if not f.removed or not prior.identified or not all(
            prior.identified[gold_position(p, f.answer)] for p in f.perms):
        return None
    d = prior.draws() if draws is None else draws
    lps = np.asarray(f.lps, dtype=np.float64)[None, :, :] - d[:, None, :]
    perms = np.broadcast_to(np.asarray(f.perms, dtype=np.int64), lps.shape)
    still = removal_tables(perms, lps)[:, f.answer]
    return float(1.0 - still.mean())


def prior_explained(f: Forwards, prior: LetterPrior, draws: np.ndarray | None = None) -> bool:
    """A removal the prior explains: ``prior_probability > EXPLAINED_CUT``. The rule removes the
    item on the recorded letters, and on the letters with the prior subtracted (for most draws
    of the prior) it does not: the prior's share of the margin (or of the hits) is what carries it
    over the threshold. Subtracting the prior only helps a gold letter away from the dominant
    position, so such a removal rests on forwards that put the gold where the prior favours."""
    p = prior_probability(f, prior, draws)
    return p is not None and p > EXPLAINED_CUT
