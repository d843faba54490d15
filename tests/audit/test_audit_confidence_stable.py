"""The grid's weights are fitted on a subset of a large group's items: chosen by each item's
seeded hash, not its position, so an item's confidence does not hang on the rows' order or on
another item's presence. The former subsample by position moved other items' flip probabilities
by up to 0.05 when one item of 3,000 was dropped."""

from __future__ import annotations

import random
from collections.abc import Sequence

from benchcheck.audit.worlds import WorldSpec, build_world
from benchcheck.stats.confidence import FIT_ITEMS, confidences, fit_subset
from benchcheck.stats.source import Forwards


def _flips(rows: Sequence[Forwards]) -> dict[str, float | None]:
    return {c.item_id: c.flip_prob for c in confidences({1: rows})}


def test_flip_probabilities_do_not_depend_on_row_order_or_an_item_outside_the_fit() -> None:
    rows = build_world(WorldSpec(n=1600, noise_sd=0.5), 1).rows
    base = _flips(rows)
    shuffled = list(rows)
    random.Random(0).shuffle(shuffled)
    again = _flips(shuffled)
    assert max(abs((base[k] or 0.0) - (again[k] or 0.0)) for k in base) < 1e-9
    fit = set(fit_subset(rows, 0).tolist())
    assert len(fit) == FIT_ITEMS
    # drop an item outside the fitted subset that is not an extreme of either coordinate
    drop = next(i for i in range(len(rows) // 2, len(rows)) if i not in fit)
    fewer = _flips(rows[:drop] + rows[drop + 1:])
    assert max(abs((base[k] or 0.0) - (fewer[k] or 0.0)) for k in fewer) < 2e-3


def test_the_subset_is_chosen_by_item_and_seed() -> None:
    rows = build_world(WorldSpec(n=1000, noise_sd=0.5), 2).rows
    ids = {rows[i].item_id for i in fit_subset(rows, 0)}
    assert ids == {rows[::-1][i].item_id for i in fit_subset(rows[::-1], 0)}
    assert ids != {rows[i].item_id for i in fit_subset(rows, 1)}
    assert fit_subset(rows[:FIT_ITEMS], 0).tolist() == list(range(FIT_ITEMS))
