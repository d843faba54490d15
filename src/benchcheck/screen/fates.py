"""Each item's fate along the chain, from the rows (pure): what `assemble` tabulates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchcheck.items import Item
from benchcheck.screen.steps import STEPS
from benchcheck.store import StepState

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


def row_margin(row: Mapping[str, Any]) -> float | None:
    """Step 1's mean margin over permutations, or the single forward's margin."""
    v = row.get("mean_margin", row.get("margin"))
    return float(v) if isinstance(v, int | float) else None


def item_fates(items: Sequence[Item], chain: Sequence[int], states: Mapping[int, StepState],
               has_frames: Callable[[Item], bool]) -> list[ItemFate]:
    out = []
    for it in items:
        f = ItemFate(it)
        out.append(f)
        if it.format != "mc":
            continue
        for s in chain:
            spec, st = STEPS[s], states.get(s, StepState())
            if spec.visual and not (it.has_frames_source and has_frames(it)) and not st.touched(it.item_id):
                f.fates[s] = NOT_SCREENED
                continue
            if it.item_id in st.ok:
                f.margins[s] = row_margin(st.ok[it.item_id])
                if st.is_removed(it.item_id):
                    f.fates[s], f.removed_at = REMOVED, s
                    break
                f.fates[s] = KEPT
            elif st.is_failed(it.item_id):
                f.fates[s] = FAILED
                break
            else:
                f.fates[s] = ERROR if it.item_id in st.errors else PENDING
                break
    return out
