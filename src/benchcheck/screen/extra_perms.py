"""``--extra-perms N``: more option permutations for the items near the threshold, as evidence.

An item whose decision lies within a band around the rule's threshold (its margin within
``band`` nats of log 2, or at step 1 one hit from the other side) is asked N more times with
the options permuted (the item's seeded permutation stream continued past the protocol's four,
so reruns ask the same). The answers are recorded in the row as ``extra_perms`` / ``extra_lp``;
the protocol's forwards still decide: ``removed`` never reads them. The audit uses them for the
item's confidence (docs/audit.md).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchcheck.engines.base import Engine, Failure, LetterScores, ScoreRequest
from benchcheck.protocol import (
    LOG2,
    MIN_PERM_HITS,
    N_PERM,
    build_prompt,
    build_prompt_options_only,
    letter_logprobs,
    permutations_for,
)
from benchcheck.screen.requests import ItemRequests
from benchcheck.spec import RunSpec


@dataclass(frozen=True, slots=True)
class ExtraPerms:
    n: int
    band: float = 1.0  # nats either side of log 2


def in_band(row: Mapping[str, Any], band: float) -> bool:
    """Near the threshold: the (mean) margin within ``band`` of log 2, or one hit from flipping."""
    if row.get("status", "ok") != "ok":
        return False
    margin = row.get("mean_margin", row.get("margin"))
    if isinstance(margin, int | float) and abs(margin - LOG2) <= band:
        return True
    hits = row.get("hits")
    return isinstance(hits, int) and hits in (MIN_PERM_HITS - 1, MIN_PERM_HITS)


def extra_requests(spec: RunSpec, ir: ItemRequests, n: int) -> ItemRequests:
    """N more forwards of the same input with the options permuted (images unchanged)."""
    it = ir.item
    perms = [tuple(p) for p in permutations_for(it.item_id, len(it.options), N_PERM + n)[N_PERM:]]
    images = ir.requests[0].images
    reqs = []
    for j, perm in enumerate(perms):
        opts = [it.options[i] for i in perm]
        intro = spec.prompt.intro
        prompt = build_prompt_options_only(intro, opts) if spec.prompt.input == "options_only" else build_prompt(
            intro, it.question, opts)
        reqs.append(ScoreRequest(f"{it.item_id}#x{j}", prompt, images))
    return ItemRequests(it, tuple(reqs), tuple(perms))


def attach(row: MutableMapping[str, Any], extra: ItemRequests, answers: Sequence[LetterScores | Failure]) -> None:
    """Record the extra forwards in the row; a failed one records why and nothing else."""
    failed = next((a for a in answers if isinstance(a, Failure)), None)
    if failed is not None:
        row["extra_error"] = str(failed)[:300]
        return
    k = len(extra.item.options)
    row["extra_perms"] = [list(p) for p in extra.perms]
    row["extra_lp"] = [letter_logprobs(a.top, k)[0] for a in answers if isinstance(a, LetterScores)]
    row["extra_n"] = len(extra.perms)


def wants_extra(row: Any, extra: ExtraPerms) -> bool:
    """Whether a fresh row is asked the extra permutations: an ok row near the threshold."""
    fields = getattr(row, "fields", None)
    return isinstance(fields, MutableMapping) and in_band(fields, extra.band)


async def score_extra(spec: RunSpec, built: Sequence[tuple[ItemRequests, Any]], engine: Engine,
                      extra: ExtraPerms) -> None:
    """The extra permutations of a chunk's items near the threshold, recorded into their ok rows."""
    near = [(extra_requests(spec, b, extra.n), r) for b, r in built if wants_extra(r, extra)]
    reqs = [q for x, _ in near for q in x.requests]
    try:
        answers: list[LetterScores | Failure] = await engine.score(reqs) if reqs else []
    except Exception as e:  # the evidence is optional: its failure never costs the row
        answers = [Failure(q.request_id, "internal", f"{type(e).__name__}: {e}") for q in reqs]
    pos = 0
    for x, r in near:
        attach(r.fields, x, answers[pos:pos + extra.n])
        pos += extra.n
