"""The audit checked against the demo's ground truth: where false removals are known.

The demo's construction says, per item, which steps can see what it needs
(``ground_truth.jsonl``'s ``answerable_at_steps``, and ``justified_removal_steps``): a removal at
any other step is false.
For an engine whose letter prior is planted (``engines.reference_prior``; the plain reference
engine's is zero), the construction also says which removals the prior drives: those the rule
makes on the recorded letters but not on the letters with the planted prior taken away
(the engine's scores without it, replayed from the rows). Three checks, per step and overall:

1. **null**: the audit's estimated chance removals (``audit.null.chance_removals``) bracket the
   true number of false removals (their 95 % interval holds it);
2. **prior**: the removals the audit flags as prior-explained are exactly the prior-driven ones;
3. **confidence**: per-item confidence ranks true removals above false ones (AUC, Mann-Whitney,
   ties half; > 0.5 passes).

The audit never sees the truth; this module only reads both and compares.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_text_atomic
from benchcheck.audit.null import chance_removals
from benchcheck.audit.rule import removes
from benchcheck.audit.run import AuditResult
from benchcheck.audit.write import csv_text
from benchcheck.stats.confidence import auc
from benchcheck.stats.source import Forwards

Planted = Callable[[int], Sequence[float]]  # k -> the prior's addition per position


def zero_prior(k: int) -> tuple[float, ...]:
    """The plain reference engine's planted prior: none (so no removal is prior-driven)."""
    return (0.0,) * k


@dataclass(frozen=True, slots=True)
class ItemTruth:
    item_id: str
    bench: str
    step: int
    removed: bool
    justified: bool  # the step can see what the item needs
    prior_driven: bool | None  # removed only because of the planted prior (None: prior not known)
    flagged_prior: bool  # the audit's "prior explains it"
    confidence: float | None
    null_p: float

    @property
    def false_removal(self) -> bool:
        return self.removed and not self.justified


@dataclass(frozen=True, slots=True)
class NullCheck:
    step: int | None  # None: all steps
    items: int
    removed: int
    false_removals: int
    est: float
    lo: float
    hi: float

    @property
    def inside(self) -> bool:
        return self.lo <= self.false_removals <= self.hi


@dataclass(frozen=True, slots=True)
class AucCheck:
    step: int | None
    true_removals: int
    false_removals: int
    auc: float | None

    @property
    def ok(self) -> bool | None:
        return None if self.auc is None else self.auc > 0.5


@dataclass(slots=True)
class TruthCheck:
    model: str
    items: list[ItemTruth] = field(default_factory=list)
    null: list[NullCheck] = field(default_factory=list)
    auc: list[AucCheck] = field(default_factory=list)

    @property
    def prior_known(self) -> bool:
        return all(t.prior_driven is not None for t in self.items)

    @property
    def prior_driven(self) -> set[tuple[int, str]]:
        return {(t.step, t.item_id) for t in self.items if t.prior_driven}

    @property
    def flagged(self) -> set[tuple[int, str]]:
        return {(t.step, t.item_id) for t in self.items if t.flagged_prior}

    @property
    def null_ok(self) -> bool:
        return all(c.inside for c in self.null)

    @property
    def prior_ok(self) -> bool | None:
        return (self.flagged == self.prior_driven) if self.prior_known else None

    @property
    def auc_ok(self) -> bool | None:
        overall = next((a for a in self.auc if a.step is None), None)
        return None if overall is None else overall.ok

    @property
    def ok(self) -> bool:
        """Every check that applies holds (an AUC with no false or no true removal does not apply)."""
        return self.null_ok and self.prior_ok is not False and self.auc_ok is not False


def load_truth(path: str | Path) -> dict[str, dict[str, Any]]:
    """item_id -> its ``ground_truth.jsonl`` record."""
    out: dict[str, dict[str, Any]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[str(rec["item_id"])] = rec
    return out


def _prior_driven(f: Forwards, planted: Planted | None) -> bool | None:
    if planted is None:
        return None
    if not f.removed:
        return False
    prior = planted(f.k)
    without = tuple(tuple(v - q for v, q in zip(lp, prior, strict=True)) for lp in f.lps)
    return not removes(f.perms, without, f.answer)


def check_truth(by_step: Mapping[int, Sequence[Forwards]], audit: AuditResult, truth: Mapping[str, Mapping[str, Any]],
                planted: Planted | None) -> TruthCheck:
    """Join the audit's per-item output with the ground truth (pure)."""
    flagged = {(int(str(r["step"])), str(r["item_id"])): bool(r["prior_explained"]) for r in audit.items}
    conf = {(c.step, c.item_id): c.confidence for c in audit.confidences}
    null_p = {(r.step, i): p for r in audit.nulls for i, p in r.item_p.items()}
    models = sorted({f.model for rows in by_step.values() for f in rows})
    out = TruthCheck(", ".join(models))
    for step in sorted(by_step):
        for f in by_step[step]:
            t = truth.get(f.item_id)
            if t is None:
                continue  # not a demo item: nothing to check it against
            # Evidence justifies a removal: a step that shows what the item needs (a duplicate's copy
            # shows it too, when no step 0 removed the duplicate first).
            justified = step in {int(s) for key in ("answerable_at_steps", "justified_removal_steps")
                                 for s in t.get(key) or []}
            out.items.append(ItemTruth(f.item_id, f.bench, step, f.removed, justified, _prior_driven(f, planted),
                                       flagged.get((step, f.item_id), False), conf.get((step, f.item_id)),
                                       null_p.get((step, f.item_id), 0.0)))
    scopes: list[int | None] = [*sorted(by_step), None]
    for scope in scopes:
        rows = [t for t in out.items if scope is None or t.step == scope]
        est, lo, hi = chance_removals([(t.null_p, t.removed) for t in rows])
        out.null.append(NullCheck(scope, len(rows), sum(t.removed for t in rows),
                                  sum(t.false_removal for t in rows), est, lo, hi))
        pos = [t.confidence for t in rows if t.removed and t.justified and t.confidence is not None]
        neg = [t.confidence for t in rows if t.false_removal and t.confidence is not None]
        out.auc.append(AucCheck(scope, len(pos), len(neg), auc(pos, neg)))
    return out


def _step(s: int | None) -> str:
    return "all" if s is None else str(s)


def tables(tc: TruthCheck) -> list[dict[str, object]]:
    """One row per check and step (``audit_truth.csv``)."""
    rows: list[dict[str, object]] = []
    for c in tc.null:
        rows.append({"check": "null", "step": _step(c.step), "items": c.items, "removed": c.removed,
                     "truth": c.false_removals, "estimate": round(c.est, 2), "lo": round(c.lo, 2),
                     "hi": round(c.hi, 2), "ok": c.inside})
    if tc.prior_known:
        for step in [*sorted({t.step for t in tc.items}), None]:
            sel = [t for t in tc.items if step is None or t.step == step]
            truth = {t.item_id for t in sel if t.prior_driven}
            flag = {t.item_id for t in sel if t.flagged_prior}
            rows.append({"check": "prior", "step": _step(step), "items": len(sel),
                         "removed": sum(t.removed for t in sel), "truth": len(truth), "estimate": len(flag),
                         "both": len(truth & flag), "only_audit": len(flag - truth), "only_truth": len(truth - flag),
                         "ok": truth == flag})
    for a in tc.auc:
        rows.append({"check": "confidence_auc", "step": _step(a.step), "true_removals": a.true_removals,
                     "false_removals": a.false_removals, "estimate": None if a.auc is None else round(a.auc, 4),
                     "ok": a.ok})
    return rows


def markdown(tc: TruthCheck, title: str) -> str:
    overall = next(c for c in tc.null if c.step is None)
    lines = [f"# {title}", "", f"Model: {tc.model}. Each check compares the audit (which never sees the truth) "
             "with the construction (`truth/ground_truth.jsonl`).", "",
             f"**Result: {'every check holds' if tc.ok else 'A CHECK FAILS'}.**", "",
             "## 1. The null's chance-removal estimate against the true false removals", "",
             "| step | items | removed | false removals (truth) | est. chance removals [95%] | brackets |",
             "|---|---|---|---|---|---|"]
    for c in tc.null:
        lines.append(f"| {_step(c.step)} | {c.items} | {c.removed} | {c.false_removals} | {c.est:.1f} "
                     f"[{c.lo:.1f}, {c.hi:.1f}] | {'yes' if c.inside else 'NO'} |")
    lines += ["", f"Overall: {overall.false_removals} false removals of {overall.removed}; the audit estimates "
              f"{overall.est:.1f} [{overall.lo:.1f}, {overall.hi:.1f}].", "", "## 2. Prior-explained removals", ""]
    if tc.prior_known:
        truth, flag = tc.prior_driven, tc.flagged
        lines.append(f"Prior-driven by construction (removed with the planted prior, kept without it): {len(truth)}; "
                     f"flagged by the audit: {len(flag)}; both: {len(truth & flag)}; "
                     f"{'the sets are equal' if truth == flag else 'the sets DIFFER'}.")
        for what, ids in (("flagged, not prior-driven", flag - truth), ("prior-driven, not flagged", truth - flag)):
            if ids:
                lines.append(f"- {what}: " + ", ".join(f"{i} (step {s})" for s, i in sorted(ids)))
    else:
        lines.append("The model's prior is not planted: no ground truth for this check.")
    lines += ["", "## 3. Per-item confidence: true removals against false ones", "",
              "| step | true removals | false removals | AUC |", "|---|---|---|---|"]
    for a in tc.auc:
        lines.append(f"| {_step(a.step)} | {a.true_removals} | {a.false_removals} | "
                     f"{'n/a' if a.auc is None else f'{a.auc:.3f}'} |")
    return "\n".join(lines) + "\n"


def write_truth_check(tc: TruthCheck, out: str | Path, title: str) -> list[Path]:
    """``audit_truth.csv`` and ``audit_truth.md`` under ``out`` (the audit's folder)."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    write_text_atomic(d / "audit_truth.csv", csv_text(tables(tc)))
    write_text_atomic(d / "audit_truth.md", markdown(tc, title))
    return [d / "audit_truth.csv", d / "audit_truth.md"]
