"""Turn engine answers into result records (pure). A row keeps everything needed to re-derive its
decision: the permutation(s), the letters' log-probs, picks, margins, and accounting."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchcheck.engines.base import Failure, LetterScores
from benchcheck.items import Item
from benchcheck.protocol import decide_permutations, decide_single, gold_position, letter_logprobs
from benchcheck.records import SCHEMA_VERSION, ErrorRow, ScoreRow, error_record, score_row
from benchcheck.screen.requests import ItemRequests
from benchcheck.spec import RunSpec
from benchcheck.unit_loop import retry_free


@dataclass(frozen=True, slots=True)
class RowContext:
    """What every row of a run carries besides the answer."""

    step: int
    step_name: str
    model: str
    revision: str | None
    engine: str
    config_hash: str
    intro: str
    host: str
    engine_config_hash: str | None = None  # the engine's own configuration (hf: HFConfig.hash)


def _base(item: Item, ctx: RowContext) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "item_id": item.item_id,
        "bench": item.bench,
        "item_hash": item.fingerprint,
        "step": ctx.step,
        "step_name": ctx.step_name,
        "model": ctx.model,
        "revision": ctx.revision,
        "engine": ctx.engine,
        "config_hash": ctx.config_hash,
        "intro": ctx.intro,
        "host": ctx.host,
        "ts": round(time.time(), 3),
        **({"engine_config_hash": ctx.engine_config_hash} if ctx.engine_config_hash is not None else {}),
    }




def error_row(item: Item, ctx: RowContext, failure: Failure | str) -> ErrorRow:
    """An error row: never counts as done; three counted ones fail the item permanently. Rows that
    say nothing about the item (unreachable server, refused key or model) are ``retry_free``."""
    kind = failure.kind if isinstance(failure, Failure) else "internal"
    status = failure.status if isinstance(failure, Failure) else None
    row = {**_base(item, ctx), "status": "error", "error_kind": kind, "error_status": status,
           "error": str(failure)[:500]}
    if retry_free(kind, status):
        row["retry_free"] = True
    return error_record(row)


def frames_label(spec: RunSpec) -> str:
    """The frame plan as rows name it: ``mid``, ``v32`` or ``v32_shuffle``."""
    return spec.frames.plan + ("_shuffle" if spec.frames.order == "shuffled" else "")


def result_row(spec: RunSpec, ir: ItemRequests, ctx: RowContext,
               answers: Sequence[LetterScores | Failure]) -> ScoreRow | ErrorRow:
    """The ok row of an item (or its error row when any of its forwards failed)."""
    failures = [a for a in answers if isinstance(a, Failure)]
    if failures:
        return error_row(ir.item, ctx, failures[0])
    scores = [a for a in answers if isinstance(a, LetterScores)]
    k = len(ir.item.options)
    parsed = [letter_logprobs(s.top, k) for s in scores]
    lps = [p[0] for p in parsed]
    golds = [gold_position(perm, ir.item.answer) for perm in ir.perms]
    row = {**_base(ir.item, ctx), "status": "ok", "video_id": ir.item.video_id, "n_options": k,
           "answer": ir.item.answer}
    if spec.n_perm > 1:
        d = decide_permutations(lps, golds)
        row.update(n_perm=len(lps), perms=[list(p) for p in ir.perms], lp=lps, gold_pos=golds, picks=d.picks,
                   margins=d.margins, hits=d.hits, mean_margin=d.mean_margin, removed=d.removed)
    else:
        one = decide_single(lps[0], golds[0])
        row.update(perm=list(ir.perms[0]), lp=lps[0], gold_pos=golds[0], pick=one.pick, margin=one.margin,
                   correct=one.correct, removed=one.removed)
    _exact_fields(row, scores, k, spec.n_perm > 1)
    row.update(
        missing=[p[1] for p in parsed],
        top1=[s.top1_token for s in scores],
        prompt_tokens=[s.prompt_tokens for s in scores],
        latency_s=round(sum(s.latency_s for s in scores), 4),
    )
    if ir.frame_order is not None:
        row["frames"] = {"plan": frames_label(spec), "positions": list(ir.frame_order), "n": len(ir.frame_order)}
        if ir.shuffle_seed is not None:
            row["frames"]["shuffle_seed"] = ir.shuffle_seed
    return score_row(row)


def _exact_fields(row: dict[str, Any], scores: Sequence[LetterScores], k: int, multi: bool) -> None:
    """``lp_exact`` beside ``lp`` when the engine gave every letter variant's full-softmax log-prob
    (merged as the protocol merges the top-20 variants), and where that came from. Evidence for
    the audit only: the decision stays on ``lp``."""
    sources = {s.exact_source for s in scores}
    if sources != {""}:
        row["lp_exact_source"] = "/".join(sorted(x for x in sources if x))
    if scores and all(s.exact for s in scores):
        exact = [letter_logprobs(s.exact, k)[0] for s in scores]
        row["lp_exact"] = exact if multi else exact[0]
