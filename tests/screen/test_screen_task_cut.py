"""Screening's ``answer`` cancelled mid-call (Ctrl-C) with the ``hf`` engine: ``AnswerCut`` carries the
rows of the items whose every forward was answered, the same rows an uncancelled call gives them,
and nothing for an item left half done; with ``--extra-perms``, not the rows that would have asked
for more (the next run asks both)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.items import Item
from benchcheck.records import ScoreRow
from benchcheck.screen.extra_perms import ExtraPerms, wants_extra
from benchcheck.screen.steps import default_run_spec
from benchcheck.screen.task import ScoreTask
from benchcheck.unit_loop import AnswerCut

ITEMS = [Item(f"q{i}", "B", f"Which colour is item {i}?", ("red", "green", "blue"), i % 3) for i in range(5)]


def _cut(engine: HFEngine, task: ScoreTask, after: int) -> AnswerCut:
    """``task.answer`` over ``ITEMS``, cancelled once ``after`` forwards (one request each) have run."""
    built = task.build_now(ITEMS)

    async def main() -> AnswerCut:
        loop = asyncio.get_running_loop()
        call = asyncio.create_task(task.answer(engine, built))
        seen = [0]

        def hook(*_: object) -> None:
            seen[0] += 1
            if seen[0] == after:
                loop.call_soon_threadsafe(call.cancel)
                time.sleep(0.3)  # the stop reaches the engine before its next forward

        handle = engine.model.lm_head.register_forward_hook(hook)
        try:
            await call
        except AnswerCut as cut:
            return cut
        finally:
            handle.remove()
        raise AssertionError("answer was not cut")

    return asyncio.run(main())


@pytest.fixture(scope="module")
def engine(tiny_model: Path) -> HFEngine:
    return HFEngine(tiny_model, device="cpu", config=HFConfig(max_batch_size=1, first_chunk=1, sort_window=1))


def test_the_cut_keeps_whole_items_only(engine: HFEngine) -> None:
    task = ScoreTask(default_run_spec(1), 1)  # step 1: four forwards an item
    whole = {r.item_id: r for r in asyncio.run(task.answer(engine, task.build_now(ITEMS)))}
    cut = _cut(engine, task, after=9)  # items q0 and q1 answered, q2 begun
    assert isinstance(cut, asyncio.CancelledError)
    assert [r.item_id for r in cut.records] == ["q0", "q1"]
    for r in cut.records:
        assert isinstance(r, ScoreRow)
        assert r.removed == whole[r.item_id].removed
        assert r.fields["picks"] == whole[r.item_id].fields["picks"]


def test_with_extra_perms_the_cut_leaves_the_rows_that_ask_for_more(engine: HFEngine) -> None:
    plain = _cut(engine, ScoreTask(default_run_spec(1), 1), after=9).records
    extra = ExtraPerms(2, band=0.05)
    task = ScoreTask(default_run_spec(1), 1, extra=extra)
    kept = _cut(engine, task, after=9).records
    assert [r.item_id for r in kept] == [r.item_id for r in plain if not wants_extra(r, extra)]
    # cut during the extra forwards: only the rows that ask for none
    rows = asyncio.run(ScoreTask(default_run_spec(1), 1).answer(engine, task.build_now(ITEMS)))
    asking = [r.item_id for r in rows if wants_extra(r, extra)]
    if not asking:
        pytest.skip("no item of the tiny model lies near the threshold")
    late = _cut(engine, task, after=4 * len(ITEMS) + 1).records
    assert [r.item_id for r in late] == [r.item_id for r in rows if r.item_id not in asking]
