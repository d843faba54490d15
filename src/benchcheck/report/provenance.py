"""Provenance: which models, revisions, engines, hashes and hosts made the rows, and when; and the
loud labels for results that no real model produced."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchcheck.report.source import StepProvenance
from benchcheck.screen.steps import MODELS, STEPS

# Engines whose answers are not a model's: the rule-based reference and the rules-file stand-in.
NOT_A_MODEL = {"reference": "the rule-based reference engine (no model: decisions follow fixed rules)",
               "scripted": "the scripted engine (answers come from a rules file)"}
RANDOM_WEIGHTS = re.compile(r"tiny|random", re.IGNORECASE)  # `model tiny` / `model random` builds


@dataclass(frozen=True, slots=True)
class StepLine:
    step: int
    name: str
    rows: int
    values: Mapping[str, Sequence[str]]
    first: str | None
    last: str | None
    expected_model: str
    expected_revision: str


def _date(ts: float | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts)) if ts is not None else None


def step_lines(prov: Mapping[int, StepProvenance]) -> list[StepLine]:
    out = []
    for s in sorted(prov):
        p = prov[s]
        ref = MODELS[STEPS[s].model] if s in STEPS else None
        out.append(StepLine(s, STEPS[s].name if s in STEPS else f"step{s}", p.rows,
                            {k: sorted(v) for k, v in p.values.items()}, _date(p.first_ts), _date(p.last_ts),
                            ref.name if ref else "", (ref.revision or "") if ref else ""))
    return out


def warnings(lines: Sequence[StepLine], run_log: Sequence[Mapping[str, Any]]) -> list[str]:
    """One loud line per step whose rows came from something that is not the real model."""
    out = []
    for ln in lines:
        engines = set(ln.values.get("engine", ()))
        models = set(ln.values.get("model", ()))
        for e in sorted(engines & NOT_A_MODEL.keys()):
            out.append(f"step {ln.step}: made by {NOT_A_MODEL[e]} — not a model's judgement")
        for m in sorted(x for x in models if RANDOM_WEIGHTS.search(x)):
            out.append(f"step {ln.step}: model {m!r} is a RANDOM-WEIGHT model — its decisions mean nothing")
        if not engines & NOT_A_MODEL.keys() and models and ln.expected_model and ln.expected_model not in models:
            revisions = set(ln.values.get("revision", ()))
            if not any(RANDOM_WEIGHTS.search(x) for x in models):
                rev = f" (revisions {', '.join(sorted(revisions))})" if revisions else ""
                out.append(f"step {ln.step}: model {', '.join(sorted(models))} is not the protocol's "
                           f"{ln.expected_model}{rev}")
    for r in run_log:
        e, m = str(r.get("engine") or ""), str(r.get("model") or "")
        where = f" ({r['results']})" if r.get("results") else ""
        if e in NOT_A_MODEL and not any(e in w for w in out):
            out.append(f"run log: step {r.get('step')}{where} ran on {NOT_A_MODEL[e]}")
        if m and RANDOM_WEIGHTS.search(m) and not any(m in w for w in out):
            out.append(f"run log: step {r.get('step')}{where} ran on model {m!r}, a RANDOM-WEIGHT model — "
                       "its decisions mean nothing")
    return sorted(set(out), key=out.index)
