"""The planner's reasons (pure): which causes block a step and how each is said."""

from __future__ import annotations

from benchcheck.items import Item
from benchcheck.screen.plan import plan_step
from benchcheck.screen.steps import DEFAULT_CHAIN
from benchcheck.store import StepState


def item(i: str, video: str | None) -> Item:
    return Item(i, "B", "Q?", ("a", "b", "c"), 0, video)


def state(rows: list[dict[str, object]]) -> StepState:
    s = StepState()
    for r in rows:
        s.add(r)
    return s


def frames(it: Item) -> bool:
    return it.video_id == "v1"


def test_waiting_for_an_earlier_step_blocks_and_names_it() -> None:
    plan = plan_step([item("a", "v1"), item("b", "v1")], 3, DEFAULT_CHAIN, {}, frames)
    assert plan.cannot_run and dict(plan.waiting_on) == {1: 2}
    assert plan.why_lines() == ["step 3: 2 items wait for step 1, which has not decided them yet: run it first"]
    one = plan_step([item("a", "v1")], 2, DEFAULT_CHAIN, {1: state([])}, frames)
    assert one.why_lines() == ["step 2: 1 item waits for step 1, which has not decided it yet: run it first"]


def test_videos_named_but_not_reached_block_text_items_do_not() -> None:
    s1 = state([{"item_id": i, "removed": False} for i in ("a", "b", "c")])
    unreached = plan_step([item("a", "k:0123"), item("b", "k:4567")], 2, DEFAULT_CHAIN, {1: s1}, frames)
    assert unreached.cannot_run and unreached.counts["NO_VIDEO"] == 2
    assert unreached.why_lines()[0].startswith("step 2: 2 items reach no video")
    text = plan_step([item("c", None)], 2, DEFAULT_CHAIN, {1: s1}, frames)
    assert not text.cannot_run and text.counts["NO_VIDEO"] == 1
    assert text.why_lines() == ["step 2: 1 item names no video: the visual steps skip it"]


def test_finished_or_removed_earlier_is_not_blocked() -> None:
    s1 = state([{"item_id": "a", "removed": True}, {"item_id": "b", "removed": False}])
    s2 = state([{"item_id": "b", "removed": False}])
    plan = plan_step([item("a", "v1"), item("b", "v1")], 2, DEFAULT_CHAIN, {1: s1, 2: s2}, frames)
    assert not plan.todo and not plan.cannot_run
    assert plan.why_lines() == ["step 2: 1 item is done at this step", "step 2: 1 item was removed at an earlier step"]
    missing = plan_step([item("m", "v9")], 2, DEFAULT_CHAIN, {1: state([{"item_id": "m", "removed": False}])},
                        frames)
    assert not missing.cannot_run and missing.missing_frames  # recorded as failures: something was done
