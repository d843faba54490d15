"""Build a step's engine requests for an item (pure).

Step 1 asks the question under 4 seeded option permutations; step 4 shows the options only in
their original order; visual steps show the middle frame, the 32-frame grid, or the grid in a
seeded per-item shuffled order, then the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchcheck.engines.base import ImageRef, ScoreRequest
from benchcheck.items import Item
from benchcheck.protocol import (
    build_prompt,
    build_prompt_options_only,
    permutations_for,
    shuffle_seed,
    shuffled_order,
)
from benchcheck.screen.steps import StepSpec

MID_POS = 16  # the middle frame is grid32[16]
N_GRID = 32


@dataclass(frozen=True, slots=True)
class ItemRequests:
    """The requests of one item at one step, and what is needed to read their answers."""

    item: Item
    requests: tuple[ScoreRequest, ...]
    perms: tuple[tuple[int, ...], ...]  # per request: perm[j] = original option shown at position j
    frame_order: tuple[int, ...] | None = None  # grid positions shown, in order (visual steps)
    shuffle_seed: str | None = None


def frames_for(spec: StepSpec, item: Item, grid: Sequence[ImageRef]) -> tuple[list[ImageRef], tuple[int, ...] | None,
                                                                                str | None]:
    """The images a visual step shows, the grid positions they come from, and the shuffle seed."""
    if spec.frames == "mid":
        return [grid[MID_POS]], (MID_POS,), None
    if spec.frames == "v32":
        return list(grid), tuple(range(len(grid))), None
    if spec.frames == "v32_shuffle":
        order = shuffled_order(item.item_id, len(grid))
        return [grid[k] for k in order], tuple(order), shuffle_seed(item.item_id)
    return [], None, None


def build_item_requests(spec: StepSpec, intro: str, item: Item,
                        grid: Sequence[ImageRef] | None = None) -> ItemRequests:
    """All requests of ``item`` at step ``spec``; ``grid`` is the 32-frame grid for visual steps."""
    k = len(item.options)
    identity = tuple(range(k))
    if spec.input == "blind":
        perms = [tuple(p) for p in permutations_for(item.item_id, k, spec.n_perm)]
        reqs = tuple(
            ScoreRequest(f"{item.item_id}#p{j}", build_prompt(intro, item.question, [item.options[i] for i in perm]))
            for j, perm in enumerate(perms)
        )
        return ItemRequests(item, reqs, tuple(perms))
    if spec.input == "options_only":
        return ItemRequests(item, (ScoreRequest(item.item_id, build_prompt_options_only(intro, item.options)),),
                            (identity,))
    if grid is None:
        raise ValueError(f"{item.item_id}: step {spec.number} needs frames")
    images, order, seed = frames_for(spec, item, grid)
    req = ScoreRequest(item.item_id, build_prompt(intro, item.question, item.options), tuple(images))
    return ItemRequests(item, (req,), (identity,), order, seed)
