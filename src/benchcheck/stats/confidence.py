"""How firmly each item's recorded decision stands (evidence beside it, never a new decision).

``flip_prob`` is the probability that re-asking the item (a fresh set of forwards with the options
permuted anew) gives the other decision; ``confidence = 1 - flip_prob``. It is an empirical-Bayes
predictive probability built on the margin's noise as the data show it, not on the item's own
four forwards alone (resampling four forwards calls a removal certain whenever they agree):

1. **Noise.** Per forward, two numbers decide: the gold's margin ``m`` and its lead over the best
   other letter ``l`` (the pick is the gold iff ``l > 0``). Their within-item covariance over
   permutations, pooled over the items of a model and step (protocol and extra forwards), is the
   noise's shape ``C``. A single-forward step takes it from its own extra permutations when at
   least ``MIN_NOISE_ITEMS`` items have them, else from the same model's step-1 permutations,
   else any model's, else from the few extra permutations it has (``noise_source`` says which).
   Items differ in how much they vary (an item whose letters are floored barely moves): item
   ``i``'s noise is ``s_i C``, the scales' distribution fitted on the same rows' replicates
   (``scale_mixture``: each item's squared deviations ``q_i`` are ``s_i`` times a chi-square), and
   each item's scale weighed by its own replicates where it has them (``rho_i``; a single forward
   has none and takes the distribution as it is). Steps 2-3 run per scale and are mixed by the
   posterior over (scale, component); with one noise for all (one scale), as before.
2. **Deconvolution.** Each item's mean ``(m, l)`` over its ``n`` forwards is its true mean plus
   that noise divided by ``n``. The distribution of true means over the items is estimated by
   maximum likelihood as a mixture ``sum_g w_g N(g, H)`` over a ``GRID`` x ``GRID`` grid ``g``
   (Kiefer-Wolfowitz's nonparametric estimate with each atom widened to a normal of ``SMOOTH``
   grid steps, EM for the weights). Each item's posterior follows from both its mean margin and
   its mean lead: component ``g`` with share ``w_g N(x; g, H + S)`` and the normal ``N(a_g, B)``,
   ``S = s C / n``, ``a_g = g + H (H + S)^-1 (x - g)``, ``B = H - H (H + S)^-1 H``. This removes
   the selection bias of an item just over the threshold (more often than its own forwards say,
   its true mean is below it), and, the components being normals rather than points, an item
   measured more finely than the grid's step keeps its own position: the former posterior over
   grid points and the margin alone put items with a clearly positive lead on a neighbouring
   point with a negative one when the noise was small (docs/audit.md, "Validity at the edges").
3. **Prediction.** Over each component ``N(a_g, B)`` of the true mean, a fresh ask removes the
   item when (step 1) the mean margin of four forwards exceeds log 2 and at least three of four
   leads are positive, by Monte Carlo over the joint normal (common random numbers, the true
   mean's draw shared by the four forwards) where the outcome is in doubt; where the independent
   product ``Phi((a_m - log 2) / sqrt(sd_m^2 / 4 + B_mm)) P(Bin(4, Phi(a_l / sqrt(sd_l^2 + B_ll)))
   >= 3)`` puts either outcome below ``MC_TAIL``, that product. A single forward: margin above
   log 2 and lead positive, one bivariate normal draw with covariance noise + ``B``
   (``lower_orthant``). Components below ``KEEP_SHARE`` of an item's posterior take the product
   of the two tails. Tails are computed as tails, so far from the threshold a flip probability
   stays a number that ranks (not a 0 tie).

With no noise at all (a deterministic engine: four identical margins, or margins that differ only
by float rounding, a spread below ``ROUNDING_SD``) a decision off the threshold cannot flip:
confidence 1. ``resampled_flip`` keeps the former estimate (every draw of four of the
recorded forwards) for comparison.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.protocol import LOG2, MIN_PERM_HITS, N_PERM, argmax_pos, gold_position, margin_of
from benchcheck.stats.cells import cell
from benchcheck.stats.normal import norm_cdf, norm_pdf, norm_tails
from benchcheck.stats.quadrature import gauss_legendre
from benchcheck.stats.source import Forwards

MC_DRAWS = 2000
MC_TAIL = 0.01  # below this, a step-1 probability is taken from the independent product (docstring)
EXACT_UP_TO = 6  # pools of at most this many forwards are resampled exhaustively (6^4 = 1296)
MIN_NOISE_ITEMS = 10  # items with extra permutations a single step needs to take its noise from them
GRID = 30  # grid points per axis of the deconvolution
EM_ROUNDS = 200
FIT_ITEMS = 800  # the grid's weights are fitted on at most this many items (``fit_subset``)
ROUNDING_SD = 1e-9  # nats: a spread of the margins this small is float rounding of equal log-probs
SMOOTH = 1.0  # each grid point's component: a normal of this many grid steps' sd an axis (docstring, 2)
LOG_SHARE_FLOOR = 750.0  # e^-750 is below the smallest positive float (about e^-744)
KEEP_SHARE = 1e-9  # posterior components below this share: their outcome from the product of tails
POSTERIOR_CHUNK = 2000  # items whose posteriors over the grid are held at once
MC_CHUNK = 256  # Monte Carlo points drawn at once
TABLE_SIDE = 57  # step 1's Monte Carlo on a table of this many means a side (``_step1_share``)
TABLE_Z = 4.0  # the table's half-width in sd of the mean margin and of a lead
SCALE_STEP = 2.0  # ratio of neighbouring candidate noise scales (variances) of ``scale_mixture``
SCALE_RANGE = 0.01  # the scale grid spans these quantiles of the items' own variance ratios
SCALE_KEEP = 1e-3  # noise-scale atoms of less weight are dropped
COLLINEAR = 1e-9  # a direction of the noise with less than this share of the largest variance is rounding


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


def _points(f: Forwards) -> np.ndarray:
    """One row per forward (protocol + extra): its gold's margin and lead."""
    return np.column_stack([_margins(f, extra=True), _leads(f)])


def noise_cov(points: Sequence[np.ndarray]) -> np.ndarray | None:
    """The pooled within-item covariance of one forward's (margin, lead) over the items' ``_points``,
    or None with no replicates."""
    acc = np.zeros((2, 2))
    df = 0
    for x in points:
        if len(x) < 2:
            continue
        d = x - x.mean(axis=0)
        acc += d.T @ d
        df += len(x) - 1
    return acc / df if df else None


def _real_axes(cov: np.ndarray) -> np.ndarray:
    """The axes (margin, lead) whose noise is more than float rounding."""
    out: np.ndarray = np.sqrt(np.maximum(np.diag(cov), 0.0)) > ROUNDING_SD
    return out


def residual_spread(points: Sequence[np.ndarray], cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item (its ``_points``), ``(q, df)``: its forwards' squared deviations from their own mean
    in units of ``cov`` (``sum_j d_j' cov^+ d_j`` over the directions with more than rounding
    noise) and their degrees of freedom; at noise ``s cov``, ``q / s`` is chi-square with ``df``
    degrees. ``df`` 0: one forward. With two options the margin and the lead are one number
    (``cov`` of rank 1): one direction."""
    vals, vecs = np.linalg.eigh(cov)
    keep = vals > max(ROUNDING_SD**2, COLLINEAR * float(vals.max()))
    q, df = np.zeros(len(points)), np.zeros(len(points))
    if not keep.any():
        return q, df
    white = vecs[:, keep] / np.sqrt(vals[keep])
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, x in enumerate(points):
        by_len[len(x)].append(i)
    for n, idx in by_len.items():
        if n < 2:
            continue
        d = np.stack([points[i] for i in idx])
        z = (d - d.mean(axis=1, keepdims=True)) @ white
        q[idx] = (z * z).sum(axis=(1, 2))
        df[idx] = keep.sum() * (n - 1)
    return q, df


def _scale_loglik(q: np.ndarray, df: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """log p(q | scale) per item and scale, up to a term of the item alone (``residual_spread``)."""
    with np.errstate(divide="ignore"):
        out: np.ndarray = -0.5 * df[:, None] * np.log(scales)[None, :] - 0.5 * q[:, None] / scales[None, :]
    return out


def scale_mixture(q: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scales, weights): how the items' noise scales (each item's noise ``s cov``) are spread, a
    discrete distribution fitted by maximum likelihood on a log grid of scales ``SCALE_STEP`` apart (EM)
    from the items' own replicates (``residual_spread``), atoms under ``SCALE_KEEP`` dropped. One
    scale of 1 (one noise for all, the former model) when fewer than ``MIN_NOISE_ITEMS`` items have
    replicates or they show no spread."""
    sel = df > 0
    one = (np.ones(1), np.ones(1))
    if sel.sum() < MIN_NOISE_ITEMS:
        return one
    q, df = q[sel], df[sel]
    s2 = q / df
    lo, hi = np.quantile(s2, SCALE_RANGE), np.quantile(s2, 1.0 - SCALE_RANGE)
    if not hi > 0:
        return one
    lo = max(lo, hi * 1e-6)
    grid = lo * SCALE_STEP ** np.arange(math.ceil(math.log(hi / lo) / math.log(SCALE_STEP)) + 1)
    ll = _scale_loglik(q, df, grid)
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    w = np.full(len(grid), 1.0 / len(grid))
    for _ in range(EM_ROUNDS):
        w = w * (lik.T @ (1.0 / np.maximum(lik @ w, 1e-300))) / len(q)
    keep = w >= SCALE_KEEP
    return grid[keep], w[keep] / w[keep].sum()


@dataclass(frozen=True, slots=True)
class _Noise:
    cov: np.ndarray
    source: str
    scales: np.ndarray  # the noise scales' distribution (``scale_mixture``): items' noise ``s cov``
    scale_w: np.ndarray


def _noise_of(points: Sequence[np.ndarray], source: str) -> _Noise | None:
    cov = noise_cov(points)
    if cov is None:
        return None
    return _Noise(cov, source, *scale_mixture(*residual_spread(points, cov)))


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


def _remove_prob(mu_m: np.ndarray, mu_l: np.ndarray, sd: tuple[float, float], multi: bool, rho: float = 0.0,
                 spread: np.ndarray | None = None, exact: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(P(a fresh ask removes), P(it keeps)), each computed as its own tail, where the item's true
    mean is ``N((mu_m, mu_l), spread)`` (a point where ``spread`` is None). ``exact``: the points
    computed jointly (the bivariate normal, or Monte Carlo for step 1 where the outcome is in
    doubt); elsewhere the independent product of the tails (all points when None)."""
    sm, sl = sd
    b = np.zeros((2, 2)) if spread is None else spread
    every = np.ones(np.shape(mu_m), dtype=bool) if exact is None else exact
    if not multi:  # one forward: both conditions on one bivariate normal draw, the mean's spread added
        vm, vl = sm * sm + b[0, 0], sl * sl + b[1, 1]
        r = (rho * sm * sl + b[0, 1]) / math.sqrt(vm * vl)
        zm, zl = (mu_m - LOG2) / math.sqrt(vm), mu_l / math.sqrt(vl)
        (cdf_m, sf_m), (cdf_l, sf_l) = norm_tails(zm), norm_tails(zl)
        yes, no = cdf_m * cdf_l, sf_m + sf_l - sf_m * sf_l
        if every.any():
            yes[every] = lower_orthant(zm[every], zl[every], r)
            no[every] = sf_m[every] + sf_l[every] - lower_orthant(-zm[every], -zl[every], r)
        return np.clip(yes, 0.0, 1.0), np.clip(no, 0.0, 1.0)
    n = N_PERM
    vm = sm * sm / n + b[0, 0]
    z_m = (mu_m - LOG2) / math.sqrt(vm) if vm > 0 else np.where(mu_m > LOG2, np.inf, -np.inf)
    vl = sl * sl + b[1, 1]
    z_l = mu_l / math.sqrt(vl) if vl > 0 else np.where(mu_l > 0, np.inf, -np.inf)
    a_yes, a_no = norm_tails(z_m)
    q_yes, q_no = norm_tails(z_l)
    # P(Bin(4, q) >= 3) and its complement, each from its own terms (the four leads taken apart:
    # the mean's spread they share is left out of this product, used only in the tails)
    b_yes = q_yes**4 + 4 * q_yes**3 * q_no
    b_no = q_no**4 + 4 * q_no**3 * q_yes + 6 * q_yes**2 * q_no**2
    yes = a_yes * b_yes
    no = a_no + b_no - a_no * b_no
    # Where the outcome is in doubt, the joint draw (margins and leads correlated within a forward,
    # the true mean's spread shared by the four) by Monte Carlo with common random numbers; far out
    # in a tail the product above, which keeps ranking where a Monte Carlo share would be a tie at 0.
    doubt = (np.minimum(yes, no) > MC_TAIL) & every
    if doubt.any() and sm > 0 and sl > 0:
        yes, no = yes.copy(), no.copy()
        yes[doubt] = _step1_share(mu_m[doubt], mu_l[doubt], sd, rho, b, (math.sqrt(vm), math.sqrt(vl)))
        no[doubt] = 1.0 - yes[doubt]
    return yes, no


def _mc_share(am: np.ndarray, al: np.ndarray, sd: tuple[float, float], rho: float, b: np.ndarray) -> np.ndarray:
    """Step 1's chance of removal at true means ``N((am, al), b)``, by Monte Carlo with common
    random numbers: four forwards, margins and leads correlated within one, the mean's draw shared."""
    sm, sl = sd
    rng = np.random.default_rng(0)
    z = rng.standard_normal((MC_DRAWS, N_PERM, 2))
    vals, vecs = np.linalg.eigh(b)  # B's square root; B may be singular (a spread of 0 on an axis)
    u = rng.standard_normal((MC_DRAWS, 2)) @ (vecs * np.sqrt(np.maximum(vals, 0.0))).T
    z2 = rho * z[..., 0] + math.sqrt(max(1 - rho * rho, 0.0)) * z[..., 1]
    share = np.empty(len(am))
    for i in range(0, len(am), MC_CHUNK):
        m = am[i:i + MC_CHUNK, None, None] + u[None, :, None, 0] + sm * z[None, :, :, 0]
        lead = al[i:i + MC_CHUNK, None, None] + u[None, :, None, 1] + sl * z2[None]
        rem = ((lead > 0).sum(axis=2) >= MIN_PERM_HITS) & (m.mean(axis=2) > LOG2)
        share[i:i + MC_CHUNK] = rem.mean(axis=1)
    return share


def _step1_share(am: np.ndarray, al: np.ndarray, sd: tuple[float, float], rho: float, b: np.ndarray,
                 scale: tuple[float, float]) -> np.ndarray:
    """``_mc_share`` at each point; for more points than a table has, on a ``TABLE_SIDE`` square
    table of the means standardized by ``scale`` (the sd of a fresh mean margin and of a lead, the
    true mean's spread included: ``_remove_prob``'s), ``TABLE_Z`` sd each way (a point in doubt
    beyond it on one axis reads the edge, where that axis's condition is all but certain), read
    bilinearly: its error is within the Monte Carlo's own (decision 120)."""
    if len(am) <= TABLE_SIDE * TABLE_SIDE:
        return _mc_share(am, al, sd, rho, b)
    sm_all, sl_all = scale
    axis = np.linspace(-TABLE_Z, TABLE_Z, TABLE_SIDE)
    tm, tl = np.meshgrid(axis, axis, indexing="ij")
    table = _mc_share(LOG2 + sm_all * tm.ravel(), sl_all * tl.ravel(), sd, rho, b).reshape(TABLE_SIDE, TABLE_SIDE)
    step = axis[1] - axis[0]
    fm = np.clip(((am - LOG2) / sm_all + TABLE_Z) / step, 0.0, TABLE_SIDE - 1.0)
    fl = np.clip((al / sl_all + TABLE_Z) / step, 0.0, TABLE_SIDE - 1.0)
    im, il = np.minimum(fm.astype(int), TABLE_SIDE - 2), np.minimum(fl.astype(int), TABLE_SIDE - 2)
    dm, dl = fm - im, fl - il
    out: np.ndarray = ((1 - dm) * (1 - dl) * table[im, il] + dm * (1 - dl) * table[im + 1, il]
                       + (1 - dm) * dl * table[im, il + 1] + dm * dl * table[im + 1, il + 1])
    return out


def _grid(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(axis=0), x.max(axis=0)
    span = np.maximum(hi - lo, 1e-6)
    axes = [np.linspace(lo[j] - 0.05 * span[j], hi[j] + 0.05 * span[j], GRID) for j in range(2)]
    mm, ll = np.meshgrid(*axes, indexing="ij")
    out: np.ndarray = np.column_stack([mm.ravel(), ll.ravel()])
    return out


def _smoothing(grid: np.ndarray) -> np.ndarray:
    """The covariance ``H`` of each grid point's normal component: ``SMOOTH`` grid steps an axis."""
    steps = [(grid[:, j].max() - grid[:, j].min()) / (GRID - 1) for j in range(2)]
    return np.diag([(SMOOTH * max(st, 1e-9)) ** 2 for st in steps])


def _loglik(x: np.ndarray, n: np.ndarray, grid: np.ndarray, cov: np.ndarray, h: np.ndarray) -> np.ndarray:
    """log N(x_i; grid_g, H + cov / n_i), per item and grid point."""
    out = np.empty((len(x), len(grid)))
    for k in np.unique(n):
        sel = n == k
        v = h + cov / k
        d = x[sel][:, None, :] - grid[None, :, :]
        q = np.einsum("igj,jk,igk->ig", d, np.linalg.inv(v), d)
        out[sel] = -0.5 * q - 0.5 * math.log(float(np.linalg.det(v)))
    return out


def _loglik_mix(x: np.ndarray, n: np.ndarray, grid: np.ndarray, cov: np.ndarray, h: np.ndarray,
                scales: np.ndarray, log_rho: np.ndarray) -> np.ndarray:
    """log sum_s rho_is N(x_i; grid_g, H + s cov / n_i), per item and grid point: the item's noise
    scale ``s`` unknown, ``rho_i`` its weights given the item's own replicates."""
    if len(scales) == 1:
        return _loglik(x, n, grid, scales[0] * cov, h)
    return _logsumexp(np.stack([_loglik(x, n, grid, sc * cov, h) + log_rho[:, b, None]
                                for b, sc in enumerate(scales)]), axis=0)


def fit_subset(rows: Sequence[Forwards], seed: int) -> np.ndarray:
    """The rows the grid's weights are fitted on: all of them up to ``FIT_ITEMS``, else the
    ``FIT_ITEMS`` whose seeded hash of (benchmark, item id) is smallest, in row order. Chosen by the
    item, not its position, so the fit and every item's confidence do not depend on the rows'
    order, and adding or dropping an item outside the subset changes nothing (a subsample drawn by
    position moved other items' flip probabilities by up to 0.05 when one of 3,000 was dropped)."""
    if len(rows) <= FIT_ITEMS:
        return np.arange(len(rows))
    keys = [int.from_bytes(hashlib.blake2b(f"{seed}|{f.bench}|{f.item_id}".encode(), digest_size=8).digest(), "big")
            for f in rows]
    return np.sort(np.argsort(np.array(keys, dtype=np.uint64), kind="stable")[:FIT_ITEMS])


def mixing_weights(x: np.ndarray, n: np.ndarray, cov: np.ndarray, fit: np.ndarray, scales: np.ndarray,
                   log_rho: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grid, weights, H): the distribution of the items' true means, ``sum_g w_g N(grid_g, H)``
    (module docstring, 2), its weights by EM for the maximum likelihood (each round two
    matrix-vector products) over the rows ``fit`` (``fit_subset``). ``scales``/``log_rho``: each
    item's noise scale weights (``_loglik_mix``)."""
    grid = _grid(x)
    h = _smoothing(grid)
    ll = _loglik_mix(x[fit], n[fit], grid, cov, h, scales, log_rho[fit])
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    lik_t = np.ascontiguousarray(lik.T)
    w = np.full(len(grid), 1.0 / len(grid))
    for _ in range(EM_ROUNDS):
        w = w * (lik_t @ (1.0 / np.maximum(lik @ w, 1e-300))) / len(fit)
    return grid, w, h


def _log_mix(log_post: np.ndarray, values: np.ndarray) -> np.ndarray:
    """log(sum_g post_g * values_g) per item, from log posteriors; -inf where every value the
    posterior reaches is 0 (a decision that cannot flip, as with a noise of rounding size)."""
    with np.errstate(divide="ignore"):
        return _logsumexp(log_post + np.log(values))


def _logsumexp(t: np.ndarray, axis: int = 1) -> np.ndarray:
    """log(sum exp(t)) over ``axis`` (per row by default); -inf where every term is -inf."""
    m = t.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out: np.ndarray = np.squeeze(m + np.log(np.exp(t - m).sum(axis=axis, keepdims=True)), axis=axis)
    return out


def _flips_given_n(x: np.ndarray, removed: np.ndarray, k: float, cov: np.ndarray, sd: tuple[float, float],
                   rho: float, multi: bool, grid: np.ndarray, log_w: np.ndarray, h: np.ndarray,
                   scales: np.ndarray, log_rho: np.ndarray) -> np.ndarray:
    """log flip probability of items with ``k`` forwards each (module docstring, 2-3): each
    (noise scale, grid component)'s posterior share and its posterior normal ``N(a_g, B)`` of the
    true mean, the fresh ask's noise at that scale."""
    lp = np.concatenate([_loglik(x, np.full(len(x), k), grid, sc * cov, h) + log_w[None, :] + log_rho[:, b, None]
                         for b, sc in enumerate(scales)], axis=1)
    log_post = lp - _logsumexp(lp)[:, None]
    # A component below a share of e^-LOG_SHARE_FLOOR adds less than the smallest float to any
    # flip probability: its outcome is not computed.
    live = log_post > -LOG_SHARE_FLOOR
    values = np.zeros(lp.shape)
    for b, sc in enumerate(scales):
        block = slice(b * len(grid), (b + 1) * len(grid))
        rows, cols = np.nonzero(live[:, block])
        if not len(rows):
            continue
        s = sc * cov / k
        gain = h @ np.linalg.inv(h + s)  # a_g = g + gain (x - g)
        bb = h - gain @ h
        bb = (bb + bb.T) / 2
        a = grid[cols] + (x[rows] - grid[cols]) @ gain.T
        sd_b = (sd[0] * math.sqrt(sc), sd[1] * math.sqrt(sc))
        yes, no = _remove_prob(a[:, 0], a[:, 1], sd_b, multi, rho, bb,
                               log_post[:, block][rows, cols] > math.log(KEEP_SHARE))
        values[rows, cols + b * len(grid)] = np.where(removed[rows], no, yes)
    return _log_mix(log_post, values)


def group_flips(rows: Sequence[Forwards], pts: Sequence[np.ndarray], noise: _Noise | None, seed: int = 0
                ) -> list[float | None]:
    """Each row's flip probability (module docstring) within one model x step (``pts``: the rows'
    ``_points``)."""
    if noise is None or not rows:
        return [None] * len(rows)
    multi = rows[0].multi
    # A spread of rounding size is no noise: deconvolving it gave a deterministic engine's 4-of-4
    # removals a flip probability of 0.14 and a kept item one of 0.86.
    real = _real_axes(noise.cov)
    cov = noise.cov * np.outer(real, real)
    sd = (math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(cov[1, 1], 0.0)))
    x = np.array([p.mean(axis=0) for p in pts])
    n = np.array([len(f.lps) + len(f.extra_lps) for f in rows], dtype=np.float64)
    removed = np.array([f.removed for f in rows])
    if sd[0] <= 0 and sd[1] <= 0:  # a deterministic engine: re-asking gives the same letters
        return [0.5 if abs(float(m) - LOG2) < 1e-12 else 0.0 for m in x[:, 0]]
    # Each item's noise scale: the noise's spread of scales, weighed by the item's own replicates.
    scales = noise.scales
    log_rho = np.log(noise.scale_w)[None, :] + _scale_loglik(*residual_spread(pts, cov), scales)
    log_rho = log_rho - _logsumexp(log_rho)[:, None]
    floor = 1e-6 * max(sd)
    cov = cov + np.diag([floor**2 if sd[0] <= 0 else 0.0, floor**2 if sd[1] <= 0 else 0.0])
    sd = (max(sd[0], floor), max(sd[1], floor))
    grid, w, h = mixing_weights(x, n, cov, fit_subset(rows, seed), scales, log_rho)
    rho = float(cov[0, 1] / (sd[0] * sd[1]))
    with np.errstate(divide="ignore"):
        log_w = np.log(w)
    log_flip = np.empty(len(rows))
    for k in np.unique(n):
        idx = np.flatnonzero(n == k)
        for i in range(0, len(idx), POSTERIOR_CHUNK):
            part = idx[i:i + POSTERIOR_CHUNK]
            log_flip[part] = _flips_given_n(x[part], removed[part], float(k), cov, sd, rho, multi, grid, log_w, h,
                                            scales, log_rho[part])
    return [float(v) for v in np.clip(np.exp(log_flip), 0.0, 1.0)]


def _noise_for(rows: Sequence[Forwards], pts: dict[int, np.ndarray], own_multi: dict[str, _Noise | None],
               anyone: _Noise | None) -> _Noise | None:
    if rows[0].multi:
        return _noise_of([pts[id(f)] for f in rows], "permutations")
    with_extra = [pts[id(f)] for f in rows if f.extra_perms]
    if len(with_extra) >= MIN_NOISE_ITEMS and (own := _noise_of(with_extra, "this step's extra permutations")):
        return own
    same = own_multi.get(rows[0].model)
    if same is not None:
        return dataclasses.replace(same, source="same model's step-1 permutations")
    if anyone is not None:
        return dataclasses.replace(anyone, source="another model's step-1 permutations")
    return _noise_of(with_extra, "this step's extra permutations")  # fewer than MIN_NOISE_ITEMS, but better than none


def confidences(by_step: dict[int, list[Forwards]], seed: int = 0) -> list[Confidence]:
    """Every recorded decision's confidence, per model x step (module docstring)."""
    pts = {id(f): _points(f) for rows in by_step.values() for f in rows}
    multi = [f for rows in by_step.values() for f in rows if f.multi]
    own_multi = {m: _noise_of([pts[id(f)] for f in multi if f.model == m], "") for m in {f.model for f in multi}}
    anyone = _noise_of([pts[id(f)] for f in multi], "") if multi else None
    out = []
    for step in sorted(by_step):
        groups: dict[str, list[Forwards]] = defaultdict(list)
        for f in by_step[step]:
            groups[f.model].append(f)
        flips: dict[str, float | None] = {}
        noises: dict[str, _Noise | None] = {}
        for model, rows in groups.items():
            noises[model] = _noise_for(rows, pts, own_multi, anyone)
            for f, p in zip(rows, group_flips(rows, [pts[id(r)] for r in rows], noises[model], seed), strict=True):
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
