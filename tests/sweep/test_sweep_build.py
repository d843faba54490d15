"""A sweep call's cells are prepared together: their frames decode at once in the pool's workers,
with the same requests as one at a time (decision 112)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from sweep_helpers import RULES, item, write_items, write_rules

from benchcheck.items import load_items
from benchcheck.sweep.cli_run import SweepArgs, plan
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.frames import FramePool
from benchcheck.sweep.results import SweepPaths
from benchcheck.sweep.runner import Unit, prepare_unit
from benchcheck.sweep.task import GenerateTask
from benchcheck.video.meta import video_dir
from benchcheck.video.plans import FramePlan


def test_a_calls_cells_decode_at_once_and_ask_what_one_at_a_time_asks(tmp_path: Path, store: Path) -> None:
    # Under the fps 0.25 ladder, a call of five cells: three stored videos, one whose mp4 is cut
    # short (its meta intact, so it is planned) and one too short to plan (asked without frames).
    # The pool has two workers; all four decodes are asked for before any ends (the pool runs two
    # at a time), and the cut video is its cell's failure line only.
    shutil.copytree(store, tmp_path / "store")
    store = tmp_path / "store"
    broken = video_dir(store, "broken")
    shutil.copytree(video_dir(store, "mid100"), broken)
    data = (broken / "video.mp4").read_bytes()
    (broken / "video.mp4").write_bytes(data[:len(data) // 20])
    rows = [item("Alpha", 0, "long16x9"), item("Alpha", 1, "mid100"), item("Alpha", 2, "s480"),
            item("Alpha", 3, "broken"), item("Alpha", 4, "short20")]
    loaded = load_items(write_items(tmp_path / "items", rows))
    args = SweepArgs(loaded.items, str(store), SweepPaths.under(tmp_path / "r"), "v_fps0.25_s224",
                     engine=SweepEngine("scripted", rules=str(write_rules(tmp_path / "rules.json", RULES))),
                     progress=False)
    cells, specs, _ = plan(args)
    cells = [c for c in cells if c.condition == "v_fps0.25_s224"]
    assert len(cells) == 5
    pool = FramePool(store, workers=2)
    order: list[tuple[str, str]] = []

    async def frames(video_id: str, fplan: FramePlan) -> tuple[list[bytes], float]:
        order.append(("ask", video_id))
        try:
            return await pool.frames(video_id, fplan)
        finally:
            order.append(("end", video_id))

    try:
        built = asyncio.run(GenerateTask(specs, frames).build(cells))
        one_by_one = [asyncio.run(prepare_unit(Unit(c.item.bench, c.condition, (c,)), specs[c.condition],
                                               pool.frames)) for c in cells]
    finally:
        pool.close()
    with_plans = [c for c in cells if c.plan is not None]
    # Every decode asked for before the first one ended: the call's cells decode together.
    first_end = next(i for i, (what, _) in enumerate(order) if what == "end")
    assert sorted(v for what, v in order[:first_end]) == sorted(c.item.video_id or "" for c in with_plans)
    assert [c for c, _ in built] == cells  # in the call's order
    for (_, together), alone in zip(built, one_by_one, strict=True):
        assert [(r.request_id, r.prompt, r.images) for r in together.requests] == \
               [(r.request_id, r.prompt, r.images) for r in alone.requests]
        assert [f["kind"] for f in together.failures] == [f["kind"] for f in alone.failures]
    kinds = {c.item.video_id: ([r.request_id for r in p.requests], [f["kind"] for f in p.failures]) for c, p in built}
    assert kinds["broken"] == ([], ["decode"])  # its cell alone fails
    assert all(len(kinds[v][0]) == 1 and not kinds[v][1] for v in ("long16x9", "mid100", "s480", "short20"))


def test_the_decode_workers_hold_no_secret_named_variable(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The sweep's key (--api-key-env) is in the environment the workers are spawned with; they
    # decode untrusted files, so they drop it (and every secret-named variable) when they start.
    monkeypatch.setenv("SWEEP_ENDPOINT_API_KEY", "sk-sweep-worker-secret")
    monkeypatch.setenv("EVAL_LLM_JUDGE_API_KEY", "sk-judge-secret-000")
    monkeypatch.setenv("BENCHCHECK_PLAIN_SETTING", "kept")
    monkeypatch.setenv("OPENROUTER", "sk-named-as-the-user-likes")  # --api-key-env OPENROUTER
    pool = FramePool(store, workers=1, secret_names=("OPENROUTER",))
    try:
        executor = pool._pool  # the pool's own worker processes
        seen = [executor.submit(os.getenv, name).result(timeout=120)
                for name in ("SWEEP_ENDPOINT_API_KEY", "EVAL_LLM_JUDGE_API_KEY", "OPENROUTER",
                             "BENCHCHECK_PLAIN_SETTING")]
    finally:
        pool.close()
    assert seen == [None, None, None, "kept"]
