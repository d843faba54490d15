"""Nulls of the removal rule, from the recorded log-probs alone (no new forwards).

Every item's rows say, for each option, whether the rule would have removed it had that option
been the gold (``rule.removal_tables``). A null says where an item's gold would be if nothing
linked the model's answer to it; an item's chance removal probability ``p_i`` is then the null's
mass on the options that remove it. Per benchmark x step:

- the **permutation null** of the rule (``null_rate`` and its 95 % interval): the golds permuted
  among the benchmark's items (within items of the same number of options), unconditioned. Beside
  it, what it would expect were every removal a shortcut (``null_if_shortcuts``): a removal is
  one-hot at its gold, so a permuted gold removes it again with the share of items whose gold is
  at the same option. Where the golds sit at one option (or a cell holds one item) the two are the
  same and the permutation null cannot tell chance from shortcuts;
- the **conditioned null**, from which the p-value, the chance-removal estimate and the verdict
  come. At a step that asks under option permutations (step 1) the null is the *option-label*
  null: the options are shuffled, so a non-shortcut item's gold is equally likely to be any of
  its options. At a single-forward step it is the *gold-frequency* null: the gold is drawn from
  the benchmark's gold distribution (``golds``). Either way an item that reached the step passed
  the earlier steps of the chain, so its gold is restricted to the options that would have let it
  pass (a model whose guesses repeat across steps had its lucky guesses removed already).
- ``p_value``: P(at least the observed removals) when no item of the cell is a shortcut, exact
  (Poisson-binomial over the items' ``p_i``); the excesses are called across cells with
  Benjamini-Hochberg (``fdr.bh_adjust``).
- ``est_false``: the chance removals among the items that are not shortcuts. A shortcut is
  removed whatever its answer, so the kept items are non-shortcuts seen with probability
  ``1 - p_i``: the Horvitz-Thompson sum over kept items of ``p_i / (1 - p_i)`` estimates the
  non-shortcuts' removals; a removal the null makes whatever the gold (``p_i = 1``) is counted as
  chance. Its 95 % interval is exact (``poisson_binomial.count_bounds``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from benchcheck.audit.chance import chance_estimate, chance_removals
from benchcheck.audit.fdr import bh_adjust
from benchcheck.audit.golds import leave_one_out, prior_centre, truncated_q
from benchcheck.audit.poisson_binomial import count_quantiles, p_value, quantiles
from benchcheck.audit.rule import group_tables, item_tables, rule_text
from benchcheck.screen.steps import DEFAULT_CHAIN
from benchcheck.stats.source import Forwards

DEFAULT_FDR = 0.05
__all__ = ["NullResult", "chance_estimate", "chance_removals", "expected_removals", "null_for", "nulls", "verdict"]

OPTION_LABEL = "option_label"
GOLD_FREQUENCY = "gold_frequency"


@dataclass(frozen=True, slots=True)
class NullResult:
    bench: str
    step: int
    n: int
    observed: int
    null_mean: float  # removal rate under the permutation null (unconditioned)
    null_lo: float
    null_hi: float
    est_false: float  # chance removals among non-shortcut items (count), conditioned null
    est_false_lo: float
    est_false_hi: float
    rounds: int
    item_p: dict[str, float]  # each item's chance removal probability (conditioned null)
    null_kind: str = GOLD_FREQUENCY
    cond_mean: float = 0.0  # removal rate the conditioned null expects
    cond_lo: float = 0.0
    cond_hi: float = 0.0
    p_value: float = 1.0
    p_adjusted: float | None = None  # Benjamini-Hochberg over the cells audited together
    called: bool = False  # an excess called at ``fdr_level``
    fdr_level: float = DEFAULT_FDR
    certain: int = 0  # removals the null makes whatever the gold (p_i = 1)
    est_false_gold: float = 0.0  # the gold-frequency null's estimate (the same as est_false off step 1)
    est_false_gold_lo: float = 0.0
    est_false_gold_hi: float = 0.0
    item_gold: dict[str, np.ndarray] = field(default_factory=dict)  # each item's null gold distribution
    null_if_shortcuts: float = 0.0  # removals the permutation null expects were every removal a shortcut
    # each item's chance removal probability were no item of the cell a shortcut (the p-value's null)
    item_p_null: dict[str, float] = field(default_factory=dict)

    @property
    def observed_rate(self) -> float:
        return self.observed / self.n if self.n else 0.0

    @property
    def excess(self) -> float:
        return self.observed_rate - self.null_mean

    @property
    def cond_excess(self) -> float:
        return self.observed_rate - self.cond_mean

    def record(self) -> dict[str, object]:
        fdr = self.est_false / self.observed if self.observed else None
        return {"bench": self.bench, "step": self.step, "items": self.n, "removed": self.observed,
                "observed_rate": round(self.observed_rate, 4), "null_rate": round(self.null_mean, 4),
                "null_lo": round(self.null_lo, 4), "null_hi": round(self.null_hi, 4),
                "excess": round(self.excess, 4), "est_false_removals": round(self.est_false, 2),
                "est_false_lo": round(self.est_false_lo, 2), "est_false_hi": round(self.est_false_hi, 2),
                "est_false_share": round(fdr, 4) if fdr is not None else None,
                "rounds": self.rounds, "rule": rule_text(),
                "null_kind": self.null_kind, "cond_null_rate": round(self.cond_mean, 4),
                "cond_null_lo": round(self.cond_lo, 4), "cond_null_hi": round(self.cond_hi, 4),
                "cond_excess": round(self.cond_excess, 4), "p_value": _sig(self.p_value),
                "p_adjusted": None if self.p_adjusted is None else _sig(self.p_adjusted),
                "excess_called": self.called, "fdr_level": self.fdr_level, "certain_removals": self.certain,
                "est_false_gold": round(self.est_false_gold, 2), "est_false_gold_lo": round(self.est_false_gold_lo, 2),
                "est_false_gold_hi": round(self.est_false_gold_hi, 2),
                "null_if_shortcuts": round(self.null_if_shortcuts / self.n, 4) if self.n else 0.0}


def _sig(v: float) -> float:
    """A p-value to 4 significant digits (small ones must stay distinguishable from 0)."""
    return float(f"{v:.4g}")


def _normalise(w: np.ndarray) -> np.ndarray:
    s = w.sum(axis=1, keepdims=True)
    out: np.ndarray = np.where(s > 0, w / np.where(s > 0, s, 1.0), 1.0 / w.shape[1])
    return out


@dataclass(frozen=True, slots=True)
class _Group:
    """One k within a cell: the arrays every null needs."""

    rows: list[Forwards]
    table: np.ndarray  # (n, k) removes-for-gold-a
    allowed: np.ndarray  # (n, k) golds that would have passed the earlier steps
    golds: np.ndarray
    removed: np.ndarray
    multi: np.ndarray  # decided over option permutations


def _group(rows: list[Forwards], survived: Mapping[str, np.ndarray] | None) -> _Group:
    k = rows[0].k
    allowed = np.ones((len(rows), k), dtype=bool)
    if survived is not None:
        for i, f in enumerate(rows):
            s = survived.get(f.item_id)
            if s is not None and s.shape == (k,):
                allowed[i] = s
    return _Group(rows, group_tables(rows), allowed, np.array([f.answer for f in rows], dtype=np.int64),
                  np.array([f.removed for f in rows], dtype=bool), np.array([f.multi for f in rows], dtype=bool))


def gold_weights(g: _Group, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item the null's gold distribution (n x k): (option-label, gold-frequency from the kept
    items, gold-frequency with every item a non-shortcut) -- the last for the p-value."""
    label = _normalise(g.allowed.astype(np.float64))
    q0 = truncated_q(g.golds, g.allowed, centre)
    h0 = _normalise(q0[None, :] * g.allowed)
    kept = ~g.removed
    keep_allowed = g.allowed[kept] & ~g.table[kept]
    qk = truncated_q(g.golds[kept], keep_allowed, centre)
    per = np.repeat(qk[None, :], len(g.rows), axis=0)
    per[kept] = leave_one_out(qk, g.golds[kept], keep_allowed)
    robust = _normalise(per * g.allowed)
    return label, robust, h0


def null_for(bench: str, step: int, rows: Sequence[Forwards], rounds: int = 1000, seed: int = 0,
             survived: Mapping[str, np.ndarray] | None = None,
             base_golds: Mapping[int, np.ndarray] | None = None) -> NullResult:
    """The nulls of one benchmark x step.

    ``survived[item]`` marks the gold options for which the item would have passed every earlier
    step of the chain that selected this step's items; ``base_golds[k]`` the benchmark's golds
    before any step (the prior centre of its gold distribution). The p-value is not yet corrected
    for the other cells (``nulls`` does that)."""
    rng = np.random.default_rng(seed)
    by_k: dict[int, list[Forwards]] = defaultdict(list)
    for f in rows:
        by_k[f.k].append(f)
    counts = np.zeros(rounds, dtype=np.int64)
    item_p: dict[str, float] = {}
    item_gold: dict[str, np.ndarray] = {}
    p_null: list[float] = []
    item_p_null: dict[str, float] = {}
    p_main: list[float] = []
    p_gold: list[float] = []
    removed: list[bool] = []
    kinds: set[str] = set()
    if_shortcuts = 0.0
    for k, rows_k in by_k.items():
        g = _group(rows_k, survived)
        base = base_golds.get(k) if base_golds is not None else None
        centre = prior_centre(base if base is not None and len(base) else g.golds, k)
        label, robust, h0 = gold_weights(g, centre)
        main = np.where(g.multi[:, None], label, robust)
        null_w = np.where(g.multi[:, None], label, h0)
        t = g.table.astype(np.float64)
        for i, f in enumerate(rows_k):
            item_gold[f.item_id] = main[i]
            item_p[f.item_id] = float(np.clip(main[i] @ t[i], 0.0, 1.0))
        p_main += [item_p[f.item_id] for f in rows_k]
        here = np.clip((null_w * t).sum(axis=1), 0.0, 1.0)
        item_p_null |= {f.item_id: float(q) for f, q in zip(rows_k, here, strict=True)}
        p_null += list(here)
        p_gold += list(np.clip((robust * t).sum(axis=1), 0.0, 1.0))
        removed += list(g.removed)
        # A removal removes for its own gold alone (argmax == gold), so a permuted gold removes a
        # shortcut again with the share of golds at that option.
        share = np.bincount(g.golds, minlength=k) / len(rows_k)
        if_shortcuts += float(share[g.golds[g.removed]].sum())
        kinds |= {OPTION_LABEL if m else GOLD_FREQUENCY for m in g.multi}
        idx = np.arange(len(rows_k))
        for r in range(rounds):
            counts[r] += int(g.table[idx, g.golds[rng.permutation(len(rows_k))]].sum())
    n = len(rows)
    observed = int(sum(removed))
    rates = counts / n if n else counts.astype(float)
    lo, hi = (float(np.quantile(rates, 0.025)), float(np.quantile(rates, 0.975))) if n else (0.0, 0.0)
    est, est_lo, est_hi, certain = chance_estimate(p_main, removed)
    gold_est, gold_lo, gold_hi, _ = chance_estimate(p_gold, removed)
    q_lo, q_hi = quantiles(p_null)
    return NullResult(bench, step, n, observed, float(rates.mean()) if n else 0.0, lo, hi, est, est_lo, est_hi,
                      rounds, item_p, null_kind=kinds.pop() if len(kinds) == 1 else "mixed",
                      cond_mean=float(sum(p_null)) / n if n else 0.0, cond_lo=q_lo / n if n else 0.0,
                      cond_hi=q_hi / n if n else 0.0, p_value=p_value(p_null, observed) if n else 1.0,
                      certain=certain, est_false_gold=gold_est, est_false_gold_lo=gold_lo, est_false_gold_hi=gold_hi,
                      item_gold=item_gold, null_if_shortcuts=if_shortcuts, item_p_null=item_p_null)


def _order(by_step: Mapping[int, object], chain: Sequence[int]) -> list[int]:
    return sorted(by_step, key=lambda s: (chain.index(s) if s in chain else len(chain), s))


def survival(by_step: Mapping[int, Sequence[Forwards]], chain: Sequence[int] = DEFAULT_CHAIN
             ) -> dict[tuple[int, str, str], np.ndarray]:
    """(step, bench, item) -> the gold options consistent with the item's rows at the earlier steps
    that selected this step's items. An earlier step selects a later one's items unless most of
    its removals are at the later step too (a step that ran on every item, removed ones too, says
    nothing about where the gold is). An item at both is conditioned on what its earlier row
    recorded: kept, on the golds that keep it; removed (screened again at the earlier step after
    the later step had run on it), on the golds that remove it."""
    order = _order(by_step, chain)
    tables: dict[int, dict[tuple[str, str], tuple[np.ndarray, bool]]] = {}
    dropped: dict[int, Counter[str]] = {}
    out: dict[tuple[int, str, str], np.ndarray] = {}
    for pos, step in enumerate(order):
        rows = by_step[step]
        t = item_tables(rows)
        here = {(f.bench, f.item_id) for f in rows}
        for earlier in order[:pos]:
            prev = tables[earlier]
            for bench in {b for b, _ in here}:
                both = [key for key in here if key[0] == bench and key in prev]
                again = sum(1 for key in both if prev[key][1])
                # One item re-screened at the earlier step used to drop the conditioning of its
                # whole benchmark, and the null then expected again the lucky guesses the earlier
                # step had removed.
                if not both or 2 * again > dropped[earlier][bench]:
                    continue
                for key in both:
                    tab = prev[key][0] if prev[key][1] else ~prev[key][0]
                    cur = out.get((step, *key))
                    out[(step, *key)] = tab if cur is None or cur.shape != tab.shape else cur & tab
        tables[step] = {(f.bench, f.item_id): (t[f.item_id], f.removed) for f in rows}
        dropped[step] = Counter(f.bench for f in rows if f.removed)
    return out


def nulls(by_step: dict[int, list[Forwards]], rounds: int = 1000, seed: int = 0,
          chain: Sequence[int] = DEFAULT_CHAIN, fdr_level: float = DEFAULT_FDR) -> list[NullResult]:
    """Every benchmark x step's nulls, each item conditioned on the earlier steps it passed, and the
    excesses called over all cells together with Benjamini-Hochberg at ``fdr_level``."""
    order = _order(by_step, chain)
    alive = survival(by_step, chain)
    base: dict[str, dict[int, np.ndarray]] = {}  # bench -> k -> golds at its first step
    out: dict[tuple[int, str], NullResult] = {}
    for step in order:
        groups: dict[str, list[Forwards]] = defaultdict(list)
        for f in by_step[step]:
            groups[f.bench].append(f)
        for bench in sorted(groups):
            rows = groups[bench]
            golds = base.setdefault(bench, {})
            for k in {f.k for f in rows} - set(golds):
                golds[k] = np.array([f.answer for f in rows if f.k == k], dtype=np.int64)
            surv = {f.item_id: alive[(step, bench, f.item_id)] for f in rows if (step, bench, f.item_id) in alive}
            out[(step, bench)] = null_for(bench, step, rows, rounds, seed, surv, golds)
    keys = sorted(out)
    adjusted = bh_adjust([out[key].p_value for key in keys])
    return [replace(out[key], p_adjusted=a, called=a <= fdr_level and out[key].observed > 0, fdr_level=fdr_level)
            for key, a in zip(keys, adjusted, strict=True)]


def expected_removals(results: Sequence[NullResult]) -> tuple[float, int, int]:
    """(expected, lo, hi): the removals the conditioned null expects over the cells together were no
    item a shortcut, and the 95 % interval of their number (Poisson-binomial over every item). The
    permutation null is unconditioned: past a step that removed the model's lucky guesses it
    expects them again, so a reader's count of chance comes from this one."""
    p = [q for r in results for q in r.item_p_null.values()]
    lo, hi = count_quantiles(p)
    return float(sum(p)), lo, hi


def verdict(r: NullResult) -> str:
    """One sentence: whether the cell removes more than the conditioned null gives (the corrected call)."""
    if r.observed == 0:
        return "no removals"
    q = "" if r.p_adjusted is None else f", BH-adjusted {r.p_adjusted:.3g}"
    if r.called:
        return (f"excess over the null (observed {r.observed_rate:.1%}, null {r.cond_mean:.1%}; "
                f"p = {r.p_value:.3g}{q}, "
                f"called at FDR {r.fdr_level:g}); an estimated {r.est_false:.1f} [{r.est_false_lo:.1f}, "
                f"{r.est_false_hi:.1f}] of the {r.observed} removals are chance")
    return (f"the null explains the removals (observed {r.observed_rate:.1%}, null {r.cond_mean:.1%}; "
            f"p = {r.p_value:.3g}{q}, no excess at FDR {r.fdr_level:g})")
