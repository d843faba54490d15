"""How firmly each item's recorded decision stands (evidence beside it, never a new decision).

``flip_prob`` is the probability that re-asking the item (a fresh set of forwards with the options
permuted anew) gives the other decision; ``confidence = 1 - flip_prob``. It is an empirical-Bayes
predictive probability built on the margin's noise as the data show it, not on the item's own
four forwards alone (resampling four forwards calls a removal certain whenever they agree):

1. **Noise.** Per forward, two numbers decide: the gold's margin ``m`` and its lead over the best
   other letter ``l`` (the pick is the gold iff ``l > 0``). Their within-item covariance over
   permutations, pooled over the items of a model and step (protocol and extra forwards), is the
   noise of one forward. A single-forward step takes it from its own extra permutations when at
   least ``MIN_NOISE_ITEMS`` items have them, else from the same model's step-1 permutations,
   else any model's, else from the few extra permutations it has (``noise_source`` says which).
2. **Deconvolution.** Each item's mean ``(m, l)`` over its forwards is its true mean plus that
   noise divided by the number of forwards. The distribution of true means over the items is
   estimated by nonparametric maximum likelihood on a grid (Kiefer-Wolfowitz, EM). Each item's
   posterior is over the true mean margin alone, from its own mean margin; its lead enters
   through the fitted distribution of leads at each true margin, and the chance of removal at a
   true margin is held non-decreasing in it (``isotonic``), so the confidence ranks items
   exactly as the margin does. This is what removes the selection bias: an item just over the threshold is, more
   often than its own forwards say, an item whose true mean is below it.
3. **Prediction.** At a true mean ``(mu_m, mu_l)``, a fresh ask removes the item when (step 1)
   the mean margin of four forwards exceeds log 2 and at least three of four leads are positive,
   by Monte Carlo over the joint normal (common random numbers) where the outcome is in doubt;
   where the independent product ``Phi((mu_m - log 2) / (sd_m / 2)) P(Bin(4, Phi(mu_l / sd_l))
   >= 3)`` puts either outcome below ``MC_TAIL``, that product. A single forward: margin above
   log 2 and lead positive, one bivariate normal draw (``lower_orthant``). Tails are computed as
   tails, so far from the threshold a flip probability stays a number that ranks (not a 0 tie).

With no noise at all (a deterministic engine: four identical margins, or margins that differ only
by float rounding, a spread below ``ROUNDING_SD``) a decision off the threshold cannot flip:
confidence 1. ``resampled_flip`` keeps the former estimate (every draw of four of the
recorded forwards) for comparison.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.protocol import LOG2, MIN_PERM_HITS, N_PERM, argmax_pos, gold_position, margin_of
from benchcheck.stats.cells import cell
from benchcheck.stats.normal import norm_cdf, norm_pdf, norm_sf
from benchcheck.stats.quadrature import gauss_legendre
from benchcheck.stats.source import Forwards

MC_DRAWS = 2000
MC_TAIL = 0.01  # below this, a step-1 probability is taken from the independent product (docstring)
EXACT_UP_TO = 6  # pools of at most this many forwards are resampled exhaustively (6^4 = 1296)
MIN_NOISE_ITEMS = 10  # items with extra permutations a single step needs to take its noise from them
GRID = 30  # grid points per axis of the deconvolution
EM_ROUNDS = 200
FIT_ITEMS = 800  # the grid's weights are fitted on at most this many items (a seeded subsample)
ROUNDING_SD = 1e-9  # nats: a spread of the margins this small is float rounding of equal log-probs


@dataclass(frozen=True, slots=True)
class Confidence:
    item_id: str
    bench: str
    step: int
    removed: bool
    confidence: float | None
    flip_prob: float | None
    hits: int | None
    margin: float
    margin_sd: float | None
    distance: float | None
    noise_sd: float | None
    method: str
    resampled_flip: float | None = None
    noise_source: str = ""

    def record(self) -> dict[str, object]:
        return {"item_id": self.item_id, "bench": self.bench, "step": self.step, "removed": self.removed,
                "confidence": cell(self.confidence), "flip_prob": cell(self.flip_prob), "hits": self.hits,
                "margin": cell(self.margin), "margin_sd": cell(self.margin_sd), "distance": cell(self.distance),
                "noise_sd": cell(self.noise_sd), "method": self.method,
                "flip_prob_sci": None if self.flip_prob is None else float(f"{self.flip_prob:.3e}"),
                "resampled_flip": cell(self.resampled_flip), "noise_source": self.noise_source}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _var(xs: Sequence[float], ddof: int = 0) -> float:
    """Plain float variance (the statistics module's exact fractions made the audit many times slower; decision 040)."""
    m = _mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - ddof)


def _margins(f: Forwards, extra: bool) -> list[float]:
    perms = f.perms + (f.extra_perms if extra else ())
    lps = f.lps + (f.extra_lps if extra else ())
    return [margin_of(lp, gold_position(p, f.answer)) for p, lp in zip(perms, lps, strict=True)]


def _leads(f: Forwards) -> list[float]:
    out = []
    for p, lp in zip(f.perms + f.extra_perms, f.lps + f.extra_lps, strict=True):
        g = gold_position(p, f.answer)
        out.append(lp[g] - max(v for i, v in enumerate(lp) if i != g))
    return out


@functools.lru_cache(maxsize=EXACT_UP_TO)
def _all_draws(pool: int) -> np.ndarray:
    return np.array(list(itertools.product(range(pool), repeat=N_PERM)), dtype=np.int64)


def _draws(pool: int, item_id: str, seed: int) -> np.ndarray:
    """Index draws of N_PERM forwards from a pool: every draw when small, else seeded Monte Carlo."""
    if pool <= EXACT_UP_TO:
        return _all_draws(pool)
    rng = np.random.default_rng(random.Random(f"{seed}|{item_id}").getrandbits(64))
    return rng.integers(0, pool, (MC_DRAWS, N_PERM))


def flip_probability(f: Forwards, seed: int = 0) -> float:
    """The former estimate: P(a draw of N_PERM of the recorded forwards gives the other decision).

    A draw removes the item when >= MIN_PERM_HITS of its forwards pick the gold letter and its
    mean margin exceeds log 2 (``rule.removes``, evaluated on per-forward hits and margins)."""
    perms, lps = f.perms + f.extra_perms, f.lps + f.extra_lps
    hit = np.array([argmax_pos(lp) == gold_position(p, f.answer) for p, lp in zip(perms, lps, strict=True)])
    margin = np.array(_margins(f, extra=True))
    idx = _draws(len(hit), f.item_id, seed)
    removed = (hit[idx].sum(axis=1) >= MIN_PERM_HITS) & (margin[idx].mean(axis=1) > LOG2)
    return float(np.mean(removed != f.removed))


def distance_to_flip(lp: Sequence[float], gold: int, threshold: float = LOG2) -> float:
    """How far the single-forward decision is from flipping, in nats (>= 0 on its own side)."""
    margin = margin_of(lp, gold)
    best_other = max(v for i, v in enumerate(lp) if i != gold)
    lead = lp[gold] - best_other  # > 0: the gold letter is the argmax
    removed = argmax_pos(lp) == gold and margin > threshold
    if removed:
        return min(margin - threshold, lead)
    return max(threshold - margin, -lead)


def pooled_sd(forwards: Sequence[Forwards]) -> float | None:
    """The root mean within-item variance of the margins over permutations (protocol + extra)."""
    vs = []
    for f in forwards:
        m = _margins(f, extra=True)
        if len(m) > 1:
            vs.append(_var(m, ddof=1))
    return math.sqrt(_mean(vs)) if vs else None


def noise_cov(forwards: Sequence[Forwards]) -> np.ndarray | None:
    """The pooled within-item covariance of one forward's (margin, lead), or None with no replicates."""
    acc = np.zeros((2, 2))
    df = 0
    for f in forwards:
        if len(f.lps) + len(f.extra_lps) < 2:
            continue
        x = np.column_stack([_margins(f, extra=True), _leads(f)])
        d = x - x.mean(axis=0)
        acc += d.T @ d
        df += len(x) - 1
    return acc / df if df else None


@dataclass(frozen=True, slots=True)
class _Noise:
    cov: np.ndarray
    source: str


_NODES, _WEIGHTS = gauss_legendre(64)  # not numpy's leggauss: LAPACK (stats.quadrature)


def lower_orthant(a: np.ndarray, b: np.ndarray, rho: float) -> np.ndarray:
    """P(Z1 <= a, Z2 <= b) for a standard bivariate normal with correlation ``rho``:
    ``int_{-inf}^{a} phi(z) Phi((b - rho z) / sqrt(1 - rho^2)) dz`` by Gauss-Legendre over the
    part of the range that holds the mass (deep in a tail, the last few sd below ``a``)."""
    r = min(max(rho, -0.999), 0.999)
    a = np.asarray(a, dtype=np.float64)
    hi = np.minimum(a, 9.5)
    lo = np.where(a < -9.0, a - 4.0, -9.5)
    half = (hi - lo) / 2
    z = (lo + half)[..., None] + half[..., None] * _NODES
    vals = norm_pdf(z) * norm_cdf((np.asarray(b)[..., None] - r * z) / math.sqrt(1 - r * r))
    out: np.ndarray = np.maximum((vals * _WEIGHTS).sum(axis=-1) * half, 0.0)
    return out


def _remove_prob(mu_m: np.ndarray, mu_l: np.ndarray, sd: tuple[float, float], multi: bool, rho: float = 0.0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(P(a fresh ask removes), P(it keeps)) at true means, each computed as its own tail."""
    sm, sl = sd
    n = N_PERM if multi else 1
    if not multi:  # one forward: both conditions on one bivariate normal draw
        zm, zl = (mu_m - LOG2) / sm, mu_l / sl
        yes = lower_orthant(zm, zl, rho)
        no = norm_sf(zm) + norm_sf(zl) - lower_orthant(-zm, -zl, rho)
        return np.clip(yes, 0.0, 1.0), np.clip(no, 0.0, 1.0)
    z_m = (mu_m - LOG2) / (sm / math.sqrt(n)) if sm > 0 else np.where(mu_m > LOG2, np.inf, -np.inf)
    z_l = mu_l / sl if sl > 0 else np.where(mu_l > 0, np.inf, -np.inf)
    a_yes, a_no = norm_cdf(z_m), norm_sf(z_m)
    q_yes, q_no = norm_cdf(z_l), norm_sf(z_l)
    # P(Bin(4, q) >= 3) and its complement, each from its own terms
    b_yes = q_yes**4 + 4 * q_yes**3 * q_no
    b_no = q_no**4 + 4 * q_no**3 * q_yes + 6 * q_yes**2 * q_no**2
    yes = a_yes * b_yes
    no = a_no + b_no - a_no * b_no
    # Where the outcome is in doubt, the joint draw (margins and leads correlated within a forward)
    # by Monte Carlo with common random numbers; far out in a tail the product above, which keeps
    # ranking where a Monte Carlo share would be a tie at 0.
    doubt = np.minimum(yes, no) > MC_TAIL
    if doubt.any() and sm > 0 and sl > 0:
        z = np.random.default_rng(0).standard_normal((MC_DRAWS, N_PERM, 2))
        z2 = rho * z[..., 0] + math.sqrt(max(1 - rho * rho, 0.0)) * z[..., 1]
        m = mu_m[doubt][:, None, None] + sm * z[None, :, :, 0]
        lead = mu_l[doubt][:, None, None] + sl * z2[None]
        rem = ((lead > 0).sum(axis=2) >= MIN_PERM_HITS) & (m.mean(axis=2) > LOG2)
        share = rem.mean(axis=1)
        yes, no = yes.copy(), no.copy()
        yes[doubt], no[doubt] = share, 1.0 - share
    return yes, no


def _grid(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(axis=0), x.max(axis=0)
    span = np.maximum(hi - lo, 1e-6)
    axes = [np.linspace(lo[j] - 0.05 * span[j], hi[j] + 0.05 * span[j], GRID) for j in range(2)]
    mm, ll = np.meshgrid(*axes, indexing="ij")
    out: np.ndarray = np.column_stack([mm.ravel(), ll.ravel()])
    return out


def _loglik(x: np.ndarray, n: np.ndarray, grid: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """log N(x_i; grid_g, cov / n_i) up to a constant per item."""
    d = x[:, None, :] - grid[None, :, :]
    q = np.einsum("igj,jk,igk->ig", d, inv, d)
    out: np.ndarray = -0.5 * n[:, None] * q
    return out


def mixing_weights(x: np.ndarray, n: np.ndarray, cov: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(grid, weights): the distribution of the items' true means (module docstring, 2), by EM
    for the nonparametric maximum likelihood (each round two matrix-vector products)."""
    grid = _grid(x)
    inv = np.linalg.pinv(cov + 1e-9 * np.eye(2))
    fit = np.arange(len(x))
    if len(fit) > FIT_ITEMS:
        fit = np.sort(np.random.default_rng(seed).choice(len(x), FIT_ITEMS, replace=False))
    ll = _loglik(x[fit], n[fit], grid, inv)
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    lik_t = np.ascontiguousarray(lik.T)
    w = np.full(len(grid), 1.0 / len(grid))
    for _ in range(EM_ROUNDS):
        w = w * (lik_t @ (1.0 / np.maximum(lik @ w, 1e-300))) / len(fit)
    return grid, w


def _log_posteriors(x: np.ndarray, n: np.ndarray, cov: np.ndarray, grid: np.ndarray, w: np.ndarray) -> np.ndarray:
    """log posterior over the grid's true mean margins, from each item's mean margin."""
    # in logs: a far item's posterior is nearly all one atom, and the rest, far below a float's
    # resolution as a share, still decides how its flip compares with another far item's
    ll = -0.5 * n[:, None] * (x[:, None, 0] - grid[None, :, 0]) ** 2 / cov[0, 0]
    with np.errstate(divide="ignore"):
        lp: np.ndarray = ll + np.log(w)[None, :]
    m = lp.max(axis=1, keepdims=True)
    out: np.ndarray = lp - (m + np.log(np.exp(lp - m).sum(axis=1, keepdims=True)))
    return out


def isotonic(y: np.ndarray, weight: np.ndarray, increasing: bool = True) -> np.ndarray:
    """Weighted least-squares monotone fit (pool adjacent violators); zero-weight points take
    their neighbour's value (they carry no posterior mass)."""
    sign = 1.0 if increasing else -1.0
    keep = weight > 0
    vals = list(sign * y[keep])
    wts = list(weight[keep])
    blocks: list[list[float]] = []  # [value, weight, count]
    for v, wt in zip(vals, wts, strict=True):
        blocks.append([v, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    fitted = np.array([b[0] for b in blocks for _ in range(int(b[2]))]) * sign
    out = np.ones_like(y)
    out[keep] = fitted
    return out


def _log_mix(log_post: np.ndarray, values: np.ndarray) -> np.ndarray:
    """log(sum_g post_g * values_g) per item, from log posteriors; -inf where every value the
    posterior reaches is 0 (a decision that cannot flip, as with a noise of rounding size)."""
    with np.errstate(divide="ignore"):
        t = log_post + np.log(values)[None, :]
        m = t.max(axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        out: np.ndarray = (m + np.log(np.exp(t - m).sum(axis=1, keepdims=True)))[:, 0]
    return out


def group_flips(rows: Sequence[Forwards], noise: _Noise | None, seed: int = 0) -> list[float | None]:
    """Each row's flip probability (module docstring) within one model x step."""
    if noise is None or not rows:
        return [None] * len(rows)
    multi = rows[0].multi
    # A spread of rounding size is no noise: deconvolving it gave a deterministic engine's 4-of-4
    # removals a flip probability of 0.14 and a kept item one of 0.86.
    real = np.sqrt(np.maximum(np.diag(noise.cov), 0.0)) > ROUNDING_SD
    cov = noise.cov * np.outer(real, real)
    sd = (math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(cov[1, 1], 0.0)))
    x = np.array([[_mean(_margins(f, extra=True)), _mean(_leads(f))] for f in rows])
    n = np.array([len(f.lps) + len(f.extra_lps) for f in rows], dtype=np.float64)
    removed = np.array([f.removed for f in rows])
    if sd[0] <= 0 and sd[1] <= 0:  # a deterministic engine: re-asking gives the same letters
        return [0.5 if abs(float(m) - LOG2) < 1e-12 else 0.0 for m in x[:, 0]]
    floor = 1e-6 * max(sd)
    cov = cov + np.diag([floor**2 if sd[0] <= 0 else 0.0, floor**2 if sd[1] <= 0 else 0.0])
    sd = (max(sd[0], floor), max(sd[1], floor))
    grid, w = mixing_weights(x, n, cov, seed)
    rho = float(cov[0, 1] / (sd[0] * sd[1]))
    yes, no = _remove_prob(grid[:, 0], grid[:, 1], sd, multi, rho)
    # By the true mean margin alone (the posterior's one coordinate): the chance of removal,
    # averaged over the leads the fitted distribution holds at that margin, and held
    # non-decreasing in it (pool-adjacent-violators), so a larger margin never claims more flips.
    cols = grid[:, 0].reshape(GRID, GRID)[:, 0]
    mass = w.reshape(GRID, GRID).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r_yes = (w * yes).reshape(GRID, GRID).sum(axis=1) / mass
        r_no = (w * no).reshape(GRID, GRID).sum(axis=1) / mass
    r_yes = isotonic(r_yes, mass, increasing=True)
    r_no = isotonic(r_no, mass, increasing=False)
    line = np.column_stack([cols, np.zeros(GRID)])
    log_post = _log_posteriors(x, n, cov, line, mass)
    log_flip = np.where(removed, _log_mix(log_post, r_no), _log_mix(log_post, r_yes))
    return [float(v) for v in np.clip(np.exp(log_flip), 0.0, 1.0)]


def _noise_for(rows: Sequence[Forwards], own_multi: dict[str, np.ndarray | None],
               anyone: np.ndarray | None) -> _Noise | None:
    if rows[0].multi:
        cov = noise_cov(rows)
        return None if cov is None else _Noise(cov, "permutations")
    with_extra = [f for f in rows if f.extra_perms]
    if len(with_extra) >= MIN_NOISE_ITEMS and (cov := noise_cov(with_extra)) is not None:
        return _Noise(cov, "this step's extra permutations")
    same = own_multi.get(rows[0].model)
    if same is not None:
        return _Noise(same, "same model's step-1 permutations")
    if anyone is not None:
        return _Noise(anyone, "another model's step-1 permutations")
    few = noise_cov(with_extra)  # fewer than MIN_NOISE_ITEMS, but better than none
    return None if few is None else _Noise(few, "this step's extra permutations")


def confidences(by_step: dict[int, list[Forwards]], seed: int = 0) -> list[Confidence]:
    """Every recorded decision's confidence, per model x step (module docstring)."""
    multi = [f for rows in by_step.values() for f in rows if f.multi]
    own_multi = {m: noise_cov([f for f in multi if f.model == m]) for m in {f.model for f in multi}}
    anyone = noise_cov(multi) if multi else None
    out = []
    for step in sorted(by_step):
        groups: dict[str, list[Forwards]] = defaultdict(list)
        for f in by_step[step]:
            groups[f.model].append(f)
        flips: dict[str, float | None] = {}
        noises: dict[str, _Noise | None] = {}
        for model, rows in groups.items():
            noises[model] = _noise_for(rows, own_multi, anyone)
            for f, p in zip(rows, group_flips(rows, noises[model], seed), strict=True):
                flips[f.item_id] = p
        for f in by_step[step]:
            out.append(_confidence(f, flips[f.item_id], noises[f.model], seed))
    return out


def _confidence(f: Forwards, flip: float | None, noise: _Noise | None, seed: int) -> Confidence:
    conf = None if flip is None else 1.0 - flip
    sd = None if noise is None else math.sqrt(max(float(noise.cov[0, 0]), 0.0))
    margins = _margins(f, extra=True)
    if f.multi:
        golds = [gold_position(p, f.answer) for p in f.perms]
        hits = sum(argmax_pos(lp) == g for lp, g in zip(f.lps, golds, strict=True))
        return Confidence(f.item_id, f.bench, f.step, f.removed, conf, flip, hits, _mean(margins[: len(f.perms)]),
                          math.sqrt(_var(margins)), None, sd,
                          "deconvolved permutations" + (f" (+{len(f.extra_perms)} extra)" if f.extra_perms else ""),
                          flip_probability(f, seed), "" if noise is None else noise.source)
    lp, gold = f.lps[0], gold_position(f.perms[0], f.answer)
    method = "own extra permutations" if f.extra_perms else ("none" if noise is None else noise.source)
    return Confidence(f.item_id, f.bench, f.step, f.removed, conf, flip, None, margin_of(lp, gold),
                      math.sqrt(_var(margins, ddof=1)) if len(margins) > 1 else None, distance_to_flip(lp, gold),
                      sd, method, None, "" if noise is None else noise.source)


def normal_cdf(d: float, sd: float) -> float:
    """Phi(d / sd); with no noise at all a decision off the threshold never flips, one on it is a coin."""
    if sd <= 0.0:
        return 1.0 if d > 0 else 0.5
    return 0.5 * (1.0 + math.erf(d / (sd * math.sqrt(2.0))))


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(a positive scores above a negative), ties counted half (Mann-Whitney)."""
    if not positives or not negatives:
        return None
    p = np.asarray(positives, dtype=np.float64)
    n = np.sort(np.asarray(negatives, dtype=np.float64))
    below = np.searchsorted(n, p, side="left")
    ties = np.searchsorted(n, p, side="right") - below
    return float((below + 0.5 * ties).sum() / (len(p) * len(n)))
