"""Result rows for the probe's tests, written through the screening's own row builder and store
(as tests/audit/audit_synth.py does): a simulated model whose logit for an option is its
``content`` score plus noise."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path

from benchcheck.engines.base import LetterScores
from benchcheck.items import Item
from benchcheck.protocol import LETTERS
from benchcheck.screen.requests import ItemRequests, build_item_requests
from benchcheck.screen.rows import RowContext, result_row
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS, STEPS
from benchcheck.spec import ModelRef, RunSpec
from benchcheck.store import append_rows


def write_items(path: Path, items: Sequence[Item]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"item_id": it.item_id, "bench": it.bench, "question": it.question,
                                        "options": list(it.options), "answer": it.answer,
                                        "video_id": it.video_id}) + "\n" for it in items))
    return path


def _scores(rid: str, logits: Sequence[float]) -> LetterScores:
    m = max(logits)
    z = m + math.log(sum(math.exp(v - m) for v in logits)) + 0.05
    top = sorted(({"token": LETTERS[j], "logprob": v - z} for j, v in enumerate(logits)),
                 key=lambda e: -float(e["logprob"]))
    return LetterScores(rid, top, str(top[0]["token"]), 50, 0.01, "sim")


def _spec(step: int) -> RunSpec:
    return STEPS[step].run_spec(INTROS[DEFAULT_INTRO], ModelRef("sim", None))


def run_step(results: Path, step: int, items: Sequence[Item], content: dict[str, Sequence[float]],
             noise: float = 0.1, seed: int = 0) -> None:
    """Write ``step``'s rows for ``items`` (one benchmark) as the screening would."""
    rng = random.Random(f"{step}|{seed}")
    spec = _spec(step)
    ctx = RowContext(step, STEPS[step].name, "sim", None, "sim", "cfg", "lmms-v1", "test")
    rows = []
    for it in items:
        if STEPS[step].visual:
            base = build_item_requests(_spec(1), it)
            ir = ItemRequests(it, (base.requests[0],), (tuple(range(len(it.options))),))
        else:
            ir = build_item_requests(spec, it)
        answers = [_scores(req.request_id, [content[it.item_id][perm[j]] + rng.gauss(0, noise)
                                            for j in range(len(perm))])
                   for req, perm in zip(ir.requests, ir.perms, strict=True)]
        rows.append(result_row(spec, ir, ctx, answers).to_dict())
    append_rows(results / f"step{step}" / f"{items[0].bench}.jsonl", rows)


def wrong_gold_world(results: Path) -> tuple[list[Item], set[str]]:
    """40 items, every eighth with a wrong gold, and rows of steps 1, 3, 5, 6 in ``results``: step 1
    sees nothing, the others the true answer (so the wrong golds are flagged with evidence).
    Returns the items and the ids of the wrong golds."""
    rng = random.Random(0)
    items, content, wrong = [], {}, set()
    for i in range(40):
        true = rng.randrange(4)
        gold = true if i % 8 else (true + 1) % 4
        if gold != true:
            wrong.add(f"F_{i}")
        items.append(Item(f"F_{i}", "Flags", f"Which tool does person {i} hold?",
                          tuple(f"tool {chr(97 + j)} {i}" for j in range(4)), gold, video_id=f"v{i // 2}"))
        content[f"F_{i}"] = [3.0 if j == true else 0.0 for j in range(4)]
    for s in (1, 3, 5, 6):
        run_step(results, s, items, content if s != 1 else {k: [0.0] * 4 for k in content}, seed=s)
    return items, wrong
