"""Provenance: which models, revisions, engines, hashes and hosts made the rows, and when; and the
loud labels for results that no real model produced."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.engines.marker import is_random_revision, read_marker
from benchcheck.report.source import StepProvenance
from benchcheck.screen.steps import MODELS, STEPS

# Engines whose answers are not a model's: the rule-based references and the rules-file stand-in.
NOT_A_MODEL = {"reference": "the rule-based reference engine (no model: decisions follow fixed rules)",
               "reference-prior": "the rule-based letter-prior engine (no model: a planted letter prior)",
               "scripted": "the scripted engine (answers come from a rules file)"}

SWEEP = "the sweep"  # the run name a sweep's run-log rows are judged under


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


def _steps(steps: Iterable[int]) -> str:
    """``steps 1-3, 5`` (runs of consecutive steps joined)."""
    xs = sorted(set(steps))
    runs: list[list[int]] = []
    for x in xs:
        if runs and x == runs[-1][-1] + 1:
            runs[-1].append(x)
        else:
            runs.append([x])
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
    return ("step " if len(xs) == 1 else "steps ") + text


def random_weights(model: str, revisions: Iterable[str | None], bases: Sequence[Path] = ()) -> bool:
    """Whether ``model`` ran with random weights, by what its checkpoint says: a revision the ``hf``
    engine took from the folder's marker, else the marker in the folder the name points at
    (as given, or under one of ``bases``). Never by the name itself."""
    if any(is_random_revision(r) for r in revisions):
        return True
    if not model or "\n" in model or len(model) > 1024:
        return False
    p = Path(model)
    return any(read_marker(c) is not None for c in ([p] if p.is_absolute() else [p, *(b / p for b in bases)]))


@dataclass(slots=True)
class _Kind:
    """One banner line: what made the rows, and where (steps of the main results, other runs)."""

    text: str
    steps: set[int] = field(default_factory=set)
    runs: dict[str, set[int]] = field(default_factory=dict)
    sweep: bool = False

    def line(self) -> str:
        where = [_steps(self.steps)] if self.steps else []
        where += [f"{_steps(s)} of {r}" for r, s in self.runs.items()]
        where += ["the sweep"] if self.sweep else []
        return f"{self.text}: {'; '.join(where)}"


def warnings(lines: Sequence[StepLine], run_log: Sequence[Mapping[str, Any]],
             specs: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None,
             bases: Sequence[Path] = (), sweep_log: Sequence[Mapping[str, Any]] = (),
             sweep_revisions: Sequence[str | None] = ()) -> list[str]:
    """One loud line per kind of thing that is not the protocol's real model (an engine that is no
    model, a random-weight model, another model), each naming the steps and runs it made.

    ``specs``: per results folder of another run (the ``results`` key of its run-log rows), its
    steps' ``run_spec.json`` (their recorded revision tells a random-weight checkpoint).
    ``sweep_log``: the run log of the sweep the report shows: its accuracies and verdicts are as
    much an engine's word as a step's removals; ``sweep_revisions``: the revisions its run specs
    recorded."""
    specs = specs or {}
    kinds: dict[str, _Kind] = {}

    def add(key: str, text: str, step: int, run: str | None) -> None:
        k = kinds.setdefault(key, _Kind(text))
        if run == SWEEP:
            k.sweep = True
        elif run is None:
            k.steps.add(step)
        else:
            k.runs.setdefault(run, set()).add(step)

    def judge(engines: Iterable[str], models: Iterable[str], revisions: Sequence[str | None], step: int,
              run: str | None, expected: str = "") -> None:
        engines, models = set(engines), set(models)
        for e in sorted(engines & NOT_A_MODEL.keys()):
            add(f"engine:{e}", f"made by {NOT_A_MODEL[e]}, not a model's judgement", step, run)
        if engines & NOT_A_MODEL.keys():
            return
        noise = {m for m in models if random_weights(m, revisions, bases)}
        for m in sorted(noise):
            add(f"random:{m}", f"model {m!r} is a RANDOM-WEIGHT model (its checkpoint says so): its decisions mean "
                               "nothing", step, run)
        other = models - noise
        if run is None and other and expected and expected not in other:
            add(f"other:{','.join(sorted(other))}", f"model {', '.join(sorted(other))} is not the protocol's "
                                                     f"{expected}", step, run)

    for ln in lines:
        judge(ln.values.get("engine", ()), ln.values.get("model", ()), list(ln.values.get("revision", ())),
              ln.step, None, ln.expected_model)
    for r in run_log:
        run = str(r["results"]) if r.get("results") else None
        step = r.get("step")
        if run is None or not isinstance(step, int):
            continue  # the main results' rows said it all
        spec = specs.get(run, {}).get(step, {})
        rev = (spec.get("model") or {}).get("revision") if isinstance(spec.get("model"), dict) else None
        judge([str(r.get("engine") or "")], [str(r.get("model") or "")], [rev], step, run)
    for r in sweep_log:
        judge([str(r.get("engine") or "")], [str(r.get("model") or "")], list(sweep_revisions), 0, SWEEP)
    return [k.line() for k in kinds.values()]
