"""The whole audit over one results folder (pure over the rows once they are read)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchcheck.audit.agreement import Agreement, agreements
from benchcheck.audit.fdr import CurveItem, CurvePoint, Target, curves, target
from benchcheck.audit.floor import floor_dependence
from benchcheck.audit.null import DEFAULT_FDR, NullResult, nulls
from benchcheck.audit.prior import (
    EXPLAINED_CUT,
    LetterPrior,
    PriorKey,
    corrected_removes,
    estimate_priors,
    prior_probability,
)
from benchcheck.audit.profile import Figure, profile
from benchcheck.audit.rule import removes
from benchcheck.audit.sensitivity import threshold_curves
from benchcheck.items import Item
from benchcheck.screen.steps import DEFAULT_CHAIN
from benchcheck.stats.confidence import Confidence, confidences
from benchcheck.stats.source import Forwards, id_clash, read_forwards
from benchcheck.stats.threads import one_blas_thread
from benchcheck.verdicts import ItemHashes

Table = list[dict[str, object]]


@dataclass(slots=True)
class AuditResult:
    nulls: list[NullResult] = field(default_factory=list)
    priors: dict[PriorKey, LetterPrior] = field(default_factory=dict)
    prior_effects: Table = field(default_factory=list)
    items: Table = field(default_factory=list)
    confidences: list[Confidence] = field(default_factory=list)
    thresholds: Table = field(default_factory=list)
    floor: Table = field(default_factory=list)
    agreement: list[Agreement] = field(default_factory=list)
    profile: list[Figure] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    fdr_curve: list[CurvePoint] = field(default_factory=list)
    fdr_targets: list[Target] = field(default_factory=list)
    fdr_level: float = DEFAULT_FDR
    target_fdr: float | None = None
    # benchmarks asked for whose items have no ok row with letter log-probs (only errors, or never
    # screened): nothing of theirs is in any table, which a reader must be told
    unaudited: list[str] = field(default_factory=list)
    # duplicates step 0 removed, left out of every table (``audit --step0``); None: no step 0 given
    step0_removed: int | None = None
    # with ``step0_removed``: benchmark -> its audited items, for each benchmark the dedup run never
    # read (step 0 decided nothing of it; ``step0.scope``)
    not_deduplicated: dict[str, int] = field(default_factory=dict)


def count_step0(res: AuditResult, items: Iterable[Item], removed: Collection[str] | None,
                deduplicated: Collection[str] | None = None) -> None:
    """Set what ``res`` says of step 0, as ``audit --step0`` counts it, for every caller alike:
    ``step0_removed``, the multiple-choice items of ``items`` the audit left out (``removed``: the
    ids step 0 removed; None: no step 0), never an open-format one, which no audit reads; and
    ``not_deduplicated``, the audited items of each benchmark outside ``deduplicated`` (the
    benchmarks the dedup run read; None: unknown, none named)."""
    mc = [it for it in items if it.format == "mc"]
    kept = [it for it in mc if it.item_id not in (removed or ())]
    res.step0_removed = None if removed is None else len(mc) - len(kept)
    res.not_deduplicated = ({} if removed is None or deduplicated is None else
                            dict(Counter(it.bench for it in kept if it.bench not in deduplicated)))


def audit_forwards(by_step: dict[int, list[Forwards]], compare: dict[int, list[Forwards]] | None = None,
                   rounds: int = 1000, seed: int = 0, chain: Sequence[int] = DEFAULT_CHAIN,
                   fdr_level: float = DEFAULT_FDR, target_fdr: float | None = None) -> AuditResult:
    """Every table of the audit from the rows of each step (and of a second run to compare);
    ``chain`` is the order the steps ran in (the null conditions on the steps an item passed);
    excesses are called at ``fdr_level`` (Benjamini-Hochberg over the cells); with ``target_fdr``,
    the smallest margin threshold whose false-discovery upper bound reaches it."""
    with one_blas_thread():
        return _audit(by_step, compare, rounds, seed, chain, fdr_level, target_fdr)


def _audit(by_step: dict[int, list[Forwards]], compare: dict[int, list[Forwards]] | None, rounds: int, seed: int,
           chain: Sequence[int], fdr_level: float, target_fdr: float | None) -> AuditResult:
    res = AuditResult(steps=sorted(by_step), fdr_level=fdr_level, target_fdr=target_fdr)
    res.priors = estimate_priors([f for rows in by_step.values() for f in rows])
    res.nulls = nulls(by_step, rounds, seed, chain, fdr_level)
    res.fdr_curve = curves(curve_items(by_step, res.nulls))
    if target_fdr is not None:
        res.fdr_targets = target(res.fdr_curve, target_fdr)
    res.confidences = confidences(by_step, seed)
    res.thresholds = threshold_curves(by_step)
    res.floor = floor_dependence(by_step)
    res.profile = profile(by_step, seed=seed, priors=res.priors)
    if compare:
        res.agreement = agreements(by_step, compare, seed=seed)
    conf = {(c.step, c.item_id): c for c in res.confidences}
    null_p = {(r.step, i): p for r in res.nulls for i, p in r.item_p.items()}
    effects: dict[tuple[str, int], dict[str, int]] = defaultdict(
        lambda: {"items": 0, "removed": 0, "prior_explained": 0, "corrected_removed": 0, "flips_to_kept": 0,
                 "flips_to_removed": 0})
    draws: dict[PriorKey, np.ndarray] = {}
    for step in sorted(by_step):
        for f in by_step[step]:
            prior = res.priors[(f.model, f.step, f.k)]
            if (f.model, f.step, f.k) not in draws:
                draws[(f.model, f.step, f.k)] = prior.draws(seed=seed)
            prior_p = prior_probability(f, prior, draws[(f.model, f.step, f.k)])
            explained = prior_p is not None and prior_p > EXPLAINED_CUT
            corr = corrected_removes(f, prior)
            e = effects[(f.bench, step)]
            e["items"] += 1
            e["removed"] += f.removed
            e["prior_explained"] += explained
            e["corrected_removed"] += corr
            e["flips_to_kept"] += f.removed and not corr
            e["flips_to_removed"] += corr and not f.removed
            c = conf[(step, f.item_id)]
            res.items.append({
                "item_id": f.item_id, "bench": f.bench, "step": step, "model": f.model, "removed": f.removed,
                "prior_explained": explained,
                "prior_prob": None if prior_p is None else round(prior_p, 4), "prior_corrected_removed": corr,
                "null_p": round(null_p.get((step, f.item_id), 0.0), 4),
                "removed_exact": None if f.lps_exact is None else removes(f.perms, f.lps_exact, f.answer),
                **{k: v for k, v in c.record().items() if k not in ("item_id", "bench", "step", "removed")}})
    res.prior_effects = [{"bench": b, "step": s, **v} for (b, s), v in sorted(effects.items())]
    return res


def curve_items(by_step: dict[int, list[Forwards]], results: Sequence[NullResult]) -> list[tuple[str, int, CurveItem]]:
    """Every item-step with its null gold distribution, for the false-discovery curve."""
    cells = {(r.step, r.bench): r for r in results}
    out = []
    for step, rows in by_step.items():
        for f in rows:
            r = cells.get((step, f.bench))
            if r is not None and f.item_id in r.item_gold:
                out.append((f.bench, step, CurveItem(f, r.item_gold[f.item_id], r.item_p[f.item_id])))
    return out


def run_audit(results: str | Path, item_ids: Iterable[str] | None = None, compare: str | Path | None = None,
              rounds: int = 1000, seed: int = 0, chain: Sequence[int] = DEFAULT_CHAIN,
              fdr_level: float = DEFAULT_FDR, target_fdr: float | None = None,
              benches: Iterable[str] | None = None, current: ItemHashes | None = None) -> AuditResult:
    """Read the rows of ``results`` (and of ``compare``) for the items given (of ``benches``, when
    given) and audit them. ``current``: the items' fingerprints (a row of an item edited since
    is no evidence)."""
    ids = set(item_ids) if item_ids is not None else None
    only = set(benches) if benches is not None else None
    by_step = read_forwards(results, ids, benches=only, current=current)
    other = read_forwards(compare, ids, benches=only, current=current) if compare is not None else None
    for folder, rows in ((results, by_step), (compare, other)):
        why = id_clash(rows) if rows is not None else None
        if why:
            raise ValueError(f"{folder}: {why}")
    res = audit_forwards(by_step, other, rounds, seed, chain, fdr_level, target_fdr)
    if only is not None:
        res.unaudited = sorted(only - {f.bench for rows in by_step.values() for f in rows})
    return res
