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
    ASSISTANT_PREFIX,
    TOP_LOGPROBS,
    build_prompt,
    build_prompt_options_only,
    permutations_for,
    shuffle_seed,
    shuffled_order,
)
from benchcheck.spec import RunSpec
from benchcheck.video import plans


@dataclass(frozen=True, slots=True)
class ItemRequests:
    """The requests of one item at one step, and what is needed to read their answers."""

    item: Item
    requests: tuple[ScoreRequest, ...]
    perms: tuple[tuple[int, ...], ...]  # per request: perm[j] = original option shown at position j
    frame_order: tuple[int, ...] | None = None  # grid positions shown, in order (visual steps)
    shuffle_seed: str | None = None


def _request(spec: RunSpec, request_id: str, prompt: str, images: tuple[ImageRef, ...] = ()) -> ScoreRequest:
    """A forward under the spec's generation settings (assistant prefix, top log-probs)."""
    g = spec.gen
    return ScoreRequest(request_id, prompt, images,
                        g.assistant_prefix if g.assistant_prefix is not None else ASSISTANT_PREFIX,
                        g.top_logprobs if g.top_logprobs is not None else TOP_LOGPROBS)


def frames_for(spec: RunSpec, item: Item, grid: Sequence[ImageRef]) -> tuple[list[ImageRef], tuple[int, ...] | None,
                                                                               str | None]:
    """The images a visual step shows, the grid positions they come from, and the shuffle seed."""
    if spec.frames.plan == "mid":
        return [grid[plans.MID_POSITION]], (plans.MID_POSITION,), None
    if spec.frames.plan == "v32" and spec.frames.order == "shuffled":
        order = shuffled_order(item.item_id, len(grid), spec.seed)
        return [grid[k] for k in order], tuple(order), shuffle_seed(item.item_id, spec.seed)
    if spec.frames.plan == "v32":
        return list(grid), tuple(range(len(grid))), None
    return [], None, None


def build_item_requests(spec: RunSpec, item: Item, grid: Sequence[ImageRef] | None = None) -> ItemRequests:
    """All requests of ``item`` under ``spec``; ``grid`` is the 32-frame grid for visual steps."""
    k = len(item.options)
    identity = tuple(range(k))
    intro = spec.prompt.intro
    if spec.prompt.input == "blind":
        perms = [tuple(p) for p in permutations_for(item.item_id, k, spec.n_perm, spec.seed)]
        reqs = tuple(
            _request(spec, f"{item.item_id}#p{j}", build_prompt(intro, item.question, [item.options[i] for i in perm]))
            for j, perm in enumerate(perms)
        )
        return ItemRequests(item, reqs, tuple(perms))
    if spec.prompt.input == "options_only":
        return ItemRequests(item, (_request(spec, item.item_id, build_prompt_options_only(intro, item.options)),),
                            (identity,))
    if grid is None:
        raise ValueError(f"{item.item_id}: {spec.name} needs frames")
    images, order, seed = frames_for(spec, item, grid)
    req = _request(spec, item.item_id, build_prompt(intro, item.question, item.options), tuple(images))
    return ItemRequests(item, (req,), (identity,), order, seed)
