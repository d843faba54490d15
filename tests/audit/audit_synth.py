"""Constructed result folders with known truth, written through the screening's own row builder.

A simulated model gives position j of a forward the logit ``content[perm[j]] + log prior[j] +
noise``; its letters' log-probs (every letter in the top list, so no floor) go through
``screen.rows.result_row`` exactly as an engine's answers would, and the rows are appended with
the store. The truth (which items are shortcuts) is returned beside the folder.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchcheck.engines.base import LetterScores
from benchcheck.items import Item
from benchcheck.protocol import LETTERS
from benchcheck.screen.requests import ItemRequests, build_item_requests
from benchcheck.screen.rows import RowContext, result_row
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS, STEPS
from benchcheck.spec import ModelRef, RunSpec
from benchcheck.store import append_rows


def make_items(bench: str, n: int, k: int, rng: random.Random) -> list[Item]:
    return [Item(f"{bench}_{i}", bench, f"question {i}?", tuple(f"option {j} of {i}" for j in range(k)),
                 rng.randrange(k)) for i in range(n)]


def write_items(path: Path, items: Sequence[Item]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"item_id": it.item_id, "bench": it.bench, "question": it.question,
                                        "options": list(it.options), "answer": it.answer}) + "\n" for it in items))
    return path


def scores(rid: str, logits: Sequence[float]) -> LetterScores:
    m = max(logits)
    z = m + math.log(sum(math.exp(v - m) for v in logits)) + 0.05  # a little mass on other tokens
    top = sorted(({"token": LETTERS[j], "logprob": v - z} for j, v in enumerate(logits)),
                 key=lambda e: -float(e["logprob"]))
    return LetterScores(rid, top, str(top[0]["token"]), 50, 0.01, "sim")


@dataclass
class SimModel:
    name: str
    prior: Sequence[float] | None = None  # over positions; None = flat
    noise: float = 0.1
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def answer(self, ir: ItemRequests, content: Sequence[float]) -> list[LetterScores]:
        k = len(content)
        prior = self.prior or [1.0 / k] * k
        out = []
        for req, perm in zip(ir.requests, ir.perms, strict=True):
            logits = [content[perm[j]] + math.log(prior[j]) + self.rng.gauss(0, self.noise) for j in range(k)]
            out.append(scores(req.request_id, logits))
        return out


def run_step(results: Path, step: int, items: Sequence[Item], model: SimModel,
             content: dict[str, Sequence[float]]) -> list[dict[str, object]]:
    """Write the rows of ``step`` for ``items`` as the screening would."""
    step_spec = STEPS[step]
    spec = run_spec_of(step)
    ctx = RowContext(step, step_spec.name, model.name, None, "sim", "cfg", "lmms-v1", "test")
    rows = []
    for it in items:
        if step_spec.visual:
            ident = tuple(range(len(it.options)))
            base = build_item_requests(run_spec_of(1), it)
            ir = ItemRequests(it, (base.requests[0],), (ident,))
        else:
            ir = build_item_requests(spec, it)
        rows.append(result_row(spec, ir, ctx, model.answer(ir, content[it.item_id])).to_dict())
    append_rows(results / f"step{step}" / f"{items[0].bench}.jsonl", rows)
    return rows


def run_spec_of(step: int) -> RunSpec:
    """The step's RunSpec under the default intro and a simulated model."""
    return STEPS[step].run_spec(INTROS[DEFAULT_INTRO], ModelRef("sim", None))


def mixed_bench(results: Path, seed: int, step: int, n: int = 1500) -> tuple[set[str], int]:
    """True shortcuts (the model knows the gold) and items on which it holds opinions that have
    nothing to do with the gold (so some are removed by chance). Returns the shortcut ids and
    the number of chance (false) removals."""
    rng = random.Random(seed)
    items = make_items(f"Mixed{seed}", n, 4, rng)
    shortcut = {it.item_id for it in items if rng.random() < 0.2}
    content = {}
    for it in items:
        c = [rng.gauss(0, 1.2) for _ in range(4)]
        if it.item_id in shortcut:
            c[it.answer] += 4.0
        content[it.item_id] = c
    model = SimModel("sim", prior=[0.3, 0.25, 0.25, 0.2], noise=0.5, rng=random.Random(seed + 1))
    rows = run_step(results, step, items, model, content)
    false = sum(1 for r in rows if r["removed"] and r["item_id"] not in shortcut)
    return shortcut, false
