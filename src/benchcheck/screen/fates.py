"""Each item's fate along the chain, from the rows (pure): what `assemble` tabulates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchcheck.items import Item
from benchcheck.screen.plan import gate
from benchcheck.screen.steps import STEPS
from benchcheck.verdicts import StepState

# Fate of an item at one step.
REMOVED, KEPT, FAILED, ERROR, PENDING, NOT_SCREENED, NOT_REACHED = (
    "removed", "kept", "failed", "error", "pending", "not_screened", "not_reached")


@dataclass(slots=True)
class ItemFate:
    item: Item
    fates: dict[int, str] = field(default_factory=dict)
    margins: dict[int, float | None] = field(default_factory=dict)
    removed_at: int | None = None

    @property
    def final(self) -> str:
        if self.item.format != "mc":
            return "open_format"
        if self.removed_at is not None:
            return REMOVED
        if FAILED in self.fates.values():
            return FAILED
        if any(f in (PENDING, ERROR) for f in self.fates.values()):
            return PENDING
        return KEPT

    def record(self, chain: Sequence[int]) -> dict[str, Any]:
        it = self.item
        out: dict[str, Any] = {"item_id": it.item_id, "bench": it.bench, "video_id": it.video_id,
                               "format": it.format, "n_options": len(it.options), "final": self.final,
                               "removed_at": self.removed_at}
        for s in chain:
            out[f"s{s}_fate"] = self.fates.get(s, NOT_REACHED)
            out[f"s{s}_margin"] = self.margins.get(s)
        return out


def kept_unscreened(final: str, fates: Mapping[int, str]) -> bool:
    """Kept, with a visual step it had no frames for. The protocol keeps such an item (it passed
    every step it was eligible for); counted apart, it is not read as having passed the visual checks."""
    return final == KEPT and NOT_SCREENED in fates.values()


# Why a pending item has no verdict yet at the step it waits on (``pending_cause``).
NEVER_SCREENED, WAITING, EDITED, RESPEC, RETRYING = "never_screened", "waiting", "edited", "respec", "retrying"


def pending_cause(f: ItemFate, chain: Sequence[int], states: Mapping[int, StepState]) -> tuple[str, int] | None:
    """Why a pending item is pending, and the step it waits on; None for any other final. Its rows
    there are of the item before an edit (``EDITED``) or under another spec (``RESPEC``); error rows
    with retries left (``RETRYING``); else none: at the chain's first step the item was never
    screened (added since, or left out by the run: ``--keep``, ``--bench``, ``--limit``), later it
    waits for that step to run over it (``WAITING``)."""
    if f.final != PENDING:
        return None
    step = next(s for s in chain if f.fates.get(s) in (PENDING, ERROR))
    if f.fates[step] == ERROR:
        return RETRYING, step
    state = states.get(step, StepState())
    if state.verdict(f.item.item_id).stale:
        return (EDITED if f.item.item_id in state.edited else RESPEC), step
    return (NEVER_SCREENED if step == chain[0] else WAITING), step


def item_fates(items: Sequence[Item], chain: Sequence[int], states: Mapping[int, StepState],
               has_frames: Callable[[Item], bool]) -> list[ItemFate]:
    """Each item's fate per step, read through the reducer and the planner's chain rule (``gate``)."""
    out = []
    for it in items:
        f = ItemFate(it)
        out.append(f)
        if it.format != "mc":
            continue
        frames = it.has_frames_source and has_frames(it)
        for s in chain:
            v = gate(it, STEPS[s], states.get(s, StepState()), frames)
            if v is None:
                f.fates[s] = NOT_SCREENED
                continue
            if v.done:
                f.margins[s] = v.margin
                if v.removed:
                    f.fates[s], f.removed_at = REMOVED, s
                    break
                f.fates[s] = KEPT
                continue
            f.fates[s] = {"failed": FAILED, "error": ERROR}.get(v.status, PENDING)
            break
    return out
