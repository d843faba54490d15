"""Where the null puts an item's gold: the gold distribution of the items that are not shortcuts.

Under the null an item that is not a shortcut has its gold drawn from the benchmark's gold
distribution q, independently of what the model answered; an item that reached a later step
passed the earlier ones, so its gold is one of those that would have let it pass (the allowed
set). Two estimates of q, both maximum a posteriori with a weak Dirichlet prior centred on the
benchmark's smoothed gold frequencies (it settles what the rows cannot, e.g. q(A) when the model
always answers A, and keeps every letter possible):

- ``null_q`` (every item of the cell is a non-shortcut, the hypothesis a p-value tests): each
  item's gold is q truncated to the golds that pass the earlier steps.
- ``kept_q`` (for the chance-removal estimate, which must hold when shortcuts are present): only
  the kept items are surely non-shortcuts, and a kept item's gold is q truncated to the golds
  that pass the earlier steps and keep it at this one. The removed items' golds, where the
  shortcuts' signal is, never enter.
"""

from __future__ import annotations

import numpy as np

PRIOR_PER_OPTION = 2.0  # pseudo-items behind the prior centre, per option
JEFFREYS = 0.5  # pseudo-count per option in the prior centre
MAX_ITER = 2000
TOL = 1e-12


def prior_centre(golds: np.ndarray, k: int) -> np.ndarray:
    """The benchmark's gold frequencies, smoothed so that no option has probability 0."""
    c = np.bincount(golds, minlength=k).astype(np.float64) + JEFFREYS
    out: np.ndarray = c / c.sum()
    return out


def prior_weight(k: int) -> float:
    return PRIOR_PER_OPTION * k


def truncated_q(golds: np.ndarray, allowed: np.ndarray, centre: np.ndarray,
                weight: float | None = None) -> np.ndarray:
    """MAP of q from golds each drawn from q restricted to its row of ``allowed`` (n x k booleans):
    maximises sum_a alpha_a log q_a + sum_i [log q(g_i) - log sum_a q_a allowed_ia], alpha = weight
    x centre, by EM over the draws each truncation rejected. An item whose gold is not allowed
    (inconsistent rows) counts as untruncated."""
    k = len(centre)
    weight = prior_weight(k) if weight is None else weight
    ok = allowed[np.arange(len(golds)), golds] if len(golds) else np.zeros(0, dtype=bool)
    a = np.where(ok[:, None], allowed, True).astype(np.float64)
    counts = np.bincount(golds, minlength=k).astype(np.float64)
    alpha = weight * centre
    if len(golds) == 0:
        return centre.copy()
    if np.all(a == 1.0):  # no truncation: the closed form
        out: np.ndarray = (counts + alpha) / (counts.sum() + alpha.sum())
        return out

    def em(q: np.ndarray) -> np.ndarray:
        big_q = a @ q
        # A kept draw stands for 1 / Q_i draws; the rejected ones fall on the disallowed golds.
        c = alpha + counts + q * ((1.0 - a) / big_q[:, None]).sum(axis=0)
        out: np.ndarray = c / c.sum()
        return out

    def objective(q: np.ndarray) -> float:
        return float((alpha + counts) @ np.log(q) - np.log(a @ q).sum())

    q: np.ndarray = (counts + alpha) / (counts.sum() + alpha.sum())
    value = objective(q)
    for _ in range(MAX_ITER):
        # SQUAREM (Varadhan & Roland 2008): two EM steps, then an extrapolation along them.
        q1 = em(q)
        q2 = em(q1)
        r, v = q1 - q, q2 - 2 * q1 + q
        nv = float(np.sqrt((v * v).sum()))
        nxt = q2
        if nv > 0:
            step = -float(np.sqrt((r * r).sum())) / nv
            cand = q - 2 * step * r + step * step * v
            if np.all(cand > 0):
                cand = em(cand / cand.sum())
                if objective(cand) >= objective(q2):
                    nxt = cand
        new_value = objective(nxt)
        done = float(np.abs(nxt - q).max()) < TOL and abs(new_value - value) < TOL
        q, value = nxt, new_value
        if done:
            break
    return q


def leave_one_out(q: np.ndarray, golds: np.ndarray, allowed: np.ndarray, weight: float | None = None) -> np.ndarray:
    """Per item, q refitted without it (one EM step from the fit): at the fit, the expected
    complete-data counts are (weight + N) q with N = sum_i 1 / Q_i, and item i adds e_{g_i} plus
    the draws its truncation rejected, q (1 - allowed_i) / Q_i. Returns n x k."""
    if len(golds) == 0:
        return np.zeros((0, len(q)))
    weight = prior_weight(len(q)) if weight is None else weight
    a = allowed.astype(np.float64)
    big_q = np.maximum(a @ q, 1e-300)
    total = weight + (1.0 / big_q).sum()
    own = np.zeros_like(a)
    own[np.arange(len(golds)), golds] = 1.0
    rest = total * q[None, :] - own - q[None, :] * (1.0 - a) / big_q[:, None]
    rest = np.maximum(rest, 1e-12 * total)
    out: np.ndarray = rest / rest.sum(axis=1, keepdims=True)
    return out
