"""Constructed worlds of known truth for the audit's estimators (tests and benchmarks/audit_calibration.py).

A simulated model gives position j of a forward the logit ``content[perm[j]] + prior[j] +
video_bias[j] + noise``: ``content`` is an opinion per option unrelated to the gold (normal,
``opinion_sd``), plus ``boost`` nats on the gold for the items that are true shortcuts; the letter
log-probs are the log-softmax with a little mass on other tokens, and only the ``listed`` best
letters are kept (the rest floored at ``log(1e-6)``, as a top-20 list with few letters in it
does). Golds follow ``gold_dist`` (uniform when None); each item belongs to one of ``videos``
videos, whose items share a letter bias (``video_sd``) and their gold position
(``video_gold_share``). The noise is normal with sd ``noise_sd``, or (heteroscedastic) with each
item's sd drawn from ``noise_sds``, the same at every ask of the item. The truth returned: the
shortcut items, the prior-driven removals (removed on the recorded letters, kept on them minus
the true prior: ``demo.audit_truth``'s definition), and for every item a fresh re-ask with the
options permuted anew (as ``--extra-perms`` asks; at a single-forward step too) and fresh noise,
the same content: its decision and the true flip probability over ``truth_draws`` re-asks.

Pure numpy, seeded: the same arguments give the same world.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from benchcheck.audit.rule import removal_tables
from benchcheck.protocol import LP_FLOOR, N_PERM
from benchcheck.stats.source import Forwards


@dataclass(frozen=True, slots=True)
class WorldSpec:
    n: int = 300
    k: int = 4
    multi: bool = True  # step 1 (four permutations) or a single-forward step
    prior: Sequence[float] | None = None  # log prior per position (None: none)
    shortcut_share: float = 0.2
    boost: float = 4.0
    opinion_sd: float = 1.2
    noise_sd: float = 0.5
    noise_sds: Sequence[float] = ()  # heteroscedastic: each item's noise sd drawn from these (empty: noise_sd)
    listed: int | None = None  # letters kept in the top list (None: min(k, 20))
    gold_dist: Sequence[float] | None = None
    videos: int | None = None  # None: one video per item
    video_sd: float = 0.0
    video_gold_share: float = 0.0  # probability an item takes its video's gold position
    truth_draws: int = 0  # re-asks per item for the true flip probability (0: one re-ask only)
    model: str = "sim"
    bench: str = "W"


@dataclass(slots=True)
class World:
    spec: WorldSpec
    rows: list[Forwards]
    shortcut: set[str]
    prior_driven: set[str]
    reask_removed: dict[str, bool] = field(default_factory=dict)
    true_flip: dict[str, float] = field(default_factory=dict)

    @property
    def step(self) -> int:
        return 1 if self.spec.multi else 4


def _letters(logits: np.ndarray, listed: int) -> np.ndarray:
    """Log-softmax over the letters plus a little mass elsewhere; letters past ``listed`` floored."""
    m = logits.max(axis=-1, keepdims=True)
    z = m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)) + 0.05
    lp = logits - z
    if listed < logits.shape[-1]:
        rank = np.argsort(np.argsort(-logits, axis=-1), axis=-1)
        lp = np.where(rank < listed, lp, LP_FLOOR)
    out: np.ndarray = lp
    return out


def _perms(rng: np.random.Generator, n: int, f: int, k: int, multi: bool) -> np.ndarray:
    if not multi:
        return np.tile(np.arange(k), (n, f, 1))
    out: np.ndarray = np.argsort(rng.random((n, f, k)), axis=2)
    return out


def build_world(spec: WorldSpec, seed: int) -> World:
    rng = np.random.default_rng(seed)
    n, k = spec.n, spec.k
    listed = spec.listed if spec.listed is not None else min(k, 20)
    prior = np.zeros(k) if spec.prior is None else np.asarray(spec.prior, dtype=np.float64)
    nv = spec.videos or n
    video = np.arange(n) % nv if spec.videos else np.arange(n)
    gd = np.full(k, 1.0 / k) if spec.gold_dist is None else np.asarray(spec.gold_dist, dtype=np.float64)
    gd = gd / gd.sum()
    video_gold = rng.choice(k, nv, p=gd)
    answer = np.where(rng.random(n) < spec.video_gold_share, video_gold[video], rng.choice(k, n, p=gd))
    shortcut = rng.random(n) < spec.shortcut_share
    content = rng.normal(0.0, spec.opinion_sd, (n, k))
    content[np.arange(n), answer] += np.where(shortcut, spec.boost, 0.0)
    bias = rng.normal(0.0, spec.video_sd, (nv, k))[video] if spec.video_sd > 0 else np.zeros((n, k))
    f = N_PERM if spec.multi else 1
    # Drawn from their own stream, so a homoscedastic world is the same world as before the option.
    item_sd = (np.random.default_rng([seed, 1]).choice(np.asarray(spec.noise_sds, dtype=np.float64), n)
               if spec.noise_sds else np.full(n, spec.noise_sd))

    def ask(r: np.random.Generator, reps: int = 1, permute: bool = spec.multi) -> tuple[np.ndarray, np.ndarray]:
        perms = _perms(r, n * reps, f, k, permute).reshape(reps, n, f, k)
        shown = np.take_along_axis(np.broadcast_to(content[None, :, None, :], perms.shape), perms, axis=3)
        # numpy draws N(0, sd) as sd times a standard normal: one sd per item draws the same numbers
        noise = r.normal(0.0, 1.0, perms.shape) * item_sd[None, :, None, None]
        logits = shown + prior + bias[None, :, None, :] + noise
        return perms, _letters(logits, listed)

    perms, lps = ask(rng)
    perms, lps = perms[0], lps[0]
    table = removal_tables(perms, lps)
    removed = table[np.arange(n), answer]
    no_prior = removal_tables(perms, lps - prior)[np.arange(n), answer]
    ids = [f"{spec.bench}_{i}" for i in range(n)]
    rows = [Forwards(1 if spec.multi else 4, spec.bench, ids[i], spec.model, int(answer[i]),
                     tuple(tuple(int(x) for x in p) for p in perms[i]),
                     tuple(tuple(float(x) for x in lp) for lp in lps[i]), bool(removed[i]), video=f"v{video[i]}")
            for i in range(n)]
    world = World(spec, rows, {ids[i] for i in range(n) if shortcut[i]},
                  {ids[i] for i in range(n) if removed[i] and not no_prior[i]})
    rr = np.random.default_rng(seed + 7_919)
    p2, l2 = ask(rr, permute=True)
    again = removal_tables(p2[0], l2[0])[np.arange(n), answer]
    world.reask_removed = {ids[i]: bool(again[i]) for i in range(n)}
    if spec.truth_draws:
        pd, ld = ask(rr, spec.truth_draws, permute=True)
        rem = removal_tables(pd.reshape(-1, f, k), ld.reshape(-1, f, k)).reshape(spec.truth_draws, n, k)
        share = rem[:, np.arange(n), answer].mean(axis=0)
        world.true_flip = {ids[i]: float(1.0 - share[i] if removed[i] else share[i]) for i in range(n)}
    return world


def log_prior(probs: Sequence[float]) -> list[float]:
    return [math.log(p) for p in probs]
