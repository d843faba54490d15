"""The spine: one reducer behind every reader, requests in flight per endpoint, stale rows, leases."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from screen_helpers import cli, decisions, ok_rows, popen, write_rules

from benchcheck.items import Item, load_items
from benchcheck.store import read_rows
from loopback import thread_server


@pytest.fixture()
def pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "items"


def _connection_errors(results: Path, items: list[Item], n: int) -> None:
    """``n`` connection-error rows per item at step 1, as the runner writes them."""
    from benchcheck.engines.base import Failure
    from benchcheck.screen.context import step_store
    from benchcheck.screen.rows import RowContext, error_row

    store = step_store(results, 1)
    ctx = RowContext(1, "blind", "m", None, "openai", "h", "lmms-v1", "host")
    for it in items:
        rows = [error_row(it, ctx, Failure(it.item_id, "connection", "refused")) for _ in range(n)]
        store.append(store.unit_path(it.bench, 0, 1), rows)


def test_three_connection_errors_do_not_fail_an_item_in_any_reader(pool: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from benchcheck.data.report import build_report
    from benchcheck.screen.assemble import assemble
    from benchcheck.screen.context import make_context
    from benchcheck.screen.steps import DEFAULT_CHAIN
    from benchcheck.verdicts import StepState

    res = tmp_path / "res"
    items = [i for i in load_items([pool]).items if i.format == "mc"][:3]
    _connection_errors(res, items, 3)
    plan = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--plan-only").stdout
    assert "FAILED_TOTAL=0" in plan and "REMAINING_TOTAL=269" in plan

    calls: Counter[str] = Counter()
    real = StepState.verdict

    def spy(self: StepState, item_id: str) -> Any:
        calls[reader] += 1
        return real(self, item_id)

    monkeypatch.setattr(StepState, "verdict", spy)
    ctx = make_context(load_items([pool]).items, res, DEFAULT_CHAIN, None, None)
    reader = "plan"
    assert ctx.plan(1).counts["FAILED_TOTAL"] == 0
    reader = "assemble"
    out = assemble(ctx)
    import pyarrow.parquet as pq

    finals = {r["item_id"]: r["final"] for r in pq.read_table(out.paths["pool_items"]).to_pylist()}
    assert all(finals[i.item_id] == "pending" for i in items)
    step1 = [r for r in out.summary if r["step"] == 1]
    assert sum(r["failed"] for r in step1) == 0 and sum(r["error_rows"] for r in step1) == 9
    reader = "report"
    rep = build_report(res, [], "host", "today", "t.tar")
    [stage] = [s for s in rep.stages if s.name == "step1"]
    assert stage.failed_items == 0 and stage.error_rows == 9
    assert calls["plan"] and calls["assemble"] and calls["report"]  # each read through the reducer


def _counting_server(delay_s: float) -> tuple[web.Application, dict[str, int]]:
    """Our serve app (scripted answers after a delay) with a count of requests in flight."""
    from benchcheck.engines.rules.scripted import ScriptedEngine
    from benchcheck.serve.app import build_app

    engine = ScriptedEngine([{"match": "", "delay_s": delay_s},
                             {"match": "", "letters": {"A": -0.5, "B": -1.0, "C": -2.0, "D": -3.0, "E": -4.0}}],
                            "m")
    app = build_app(engine, "m", max_batch_size=256, max_inflight_batches=64)
    seen = {"now": 0, "max": 0}

    @web.middleware
    async def count(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        if request.path != "/v1/chat/completions":
            return await handler(request)
        seen["now"] += 1
        seen["max"] = max(seen["max"], seen["now"])
        try:
            return await handler(request)
        finally:
            seen["now"] -= 1

    app.middlewares.append(count)
    return app, seen


@pytest.mark.parametrize("workers", [64, 8])
def test_workers_set_requests_in_flight_per_endpoint(pool: Path, tmp_path: Path, workers: int) -> None:
    app, seen = _counting_server(0.25)
    with thread_server(app) as url:
        r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(tmp_path / "res"), "--engine",
                "openai", "--endpoint", url + "/v1", "--model", "m", "--workers", str(workers), "--limit", "20",
                "--no-progress")
    assert r.returncode == 0, r.stderr
    assert seen["max"] == workers


def test_a_changed_frame_constant_changes_the_hash_and_old_rows_are_stale(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from benchcheck import protocol
    from benchcheck.demo.items import write_demo_items
    from benchcheck.demo.videos import make_demo_videos
    from benchcheck.engines.rules.scripted import ScriptedEngine
    from benchcheck.screen.context import make_context, step_store
    from benchcheck.screen.frames import CacheFrames
    from benchcheck.screen.runner import RunConfig, run_step, step_run_spec
    from benchcheck.screen.steps import INTROS, STEPS
    from benchcheck.spec import ModelRef
    from benchcheck.video import plans
    from benchcheck.video.batch import extract_many
    from benchcheck.video.store import normalize_videos

    intro, model = INTROS["lmms-v1"], ModelRef("m", "r")
    before = {s: STEPS[s].run_spec(intro, model).config_hash for s in (2, 3, 5)}
    for module, name, value in ((plans, "FRAME_LONG_SIDE", 336), (protocol, "JPEG_QUALITY", 90), (plans, "GRID32", 16)):
        with monkeypatch.context() as m:
            m.setattr(module, name, value)
            assert all(STEPS[s].run_spec(intro, model).config_hash != before[s] for s in (3, 5)), name

    report = normalize_videos(make_demo_videos(tmp_path / "v", n=1), tmp_path / "store")
    vid = report.outcomes[0].content_hash
    assert vid
    extract_many(tmp_path / "store", [vid], "v32", tmp_path / "frames")
    write_demo_items(tmp_path / "items", video_ids=[vid])
    ctx = make_context(load_items([tmp_path / "items"]).items, tmp_path / "res", (2,), CacheFrames(tmp_path / "frames"),
                       None)
    engine = ScriptedEngine([{"match": "", "letters": {"A": -0.5, "B": -1.0, "C": -2.0, "D": -3.0, "E": -4.0}}])
    cfg = RunConfig(step=2, intro=intro, workers=8, batch_items=4, progress=False)
    first = asyncio.run(run_step(ctx, engine, cfg, lambda s: None))
    assert first.ok > 0 and (tmp_path / "res" / "step2" / "run_spec.json").is_file()
    assert ctx.plan(2).remaining == 0 and "STALE=0" in ctx.plan(2).lines()

    monkeypatch.setattr(plans, "MID_POSITION", 15)  # step 2 shows grid[15] now: a new question
    new = step_run_spec(2, intro, engine)
    assert new.config_hash != {r["config_hash"] for r in ok_rows(tmp_path / "res" / "step2").values()}.pop()
    step_store(tmp_path / "res", 2).write_spec(new)  # what a run under the new constant records first
    plan = ctx.plan(2)
    assert plan.counts["STALE"] == first.ok and plan.remaining == first.ok and plan.counts["DONE_TOTAL"] == 0
    again = asyncio.run(run_step(ctx, engine, cfg, lambda s: None))
    assert again.ok == first.ok and again.stale == first.ok
    assert ctx.plan(2).remaining == 0
    rows = [r for f in (tmp_path / "res" / "step2").glob("*.jsonl") for r in read_rows(f)]
    now = [r for r in rows if r["config_hash"] == new.config_hash]
    assert len(now) == first.ok and {r["frames"]["positions"][0] for r in now} == {15}


def test_two_screen_processes_on_one_shard_work_each_item_once(pool: Path, tmp_path: Path) -> None:
    fast = write_rules(tmp_path / "fast.json")
    single = cli("screen", "--items", str(pool), "--step", "1", "--engine", "scripted", "--rules", str(fast),
                 "--no-progress", "--results", str(tmp_path / "single"))
    assert single.returncode == 0, single.stderr
    rules = write_rules(tmp_path / "rules.json", delay_s=0.08)  # same letters, slower: ~10 s a run
    args = ["screen", "--items", str(pool), "--step", "1", "--engine", "scripted", "--rules", str(rules),
            "--no-progress", "--workers", "1", "--batch-items", "2"]
    res = tmp_path / "twice"
    first = popen(*args, "--results", str(res))
    deadline = time.time() + 60
    while time.time() < deadline and sum(1 for f in (res / "step1").glob("*.jsonl") for _ in read_rows(f)) < 5:
        time.sleep(0.05)
    plan = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--plan-only").stdout
    held = int(plan.split("HELD_BY_OTHER=")[1].split()[0])
    second = popen(*args, "--results", str(res))
    out1, err1 = first.communicate(timeout=240)
    out2, err2 = second.communicate(timeout=240)
    assert first.returncode == 0 and second.returncode == 0, err1 + err2
    assert held > 0  # the first process was in the middle of a unit
    assert "HELD_BY_OTHER=" in out1 + out2
    assert decisions(res / "step1") == decisions(tmp_path / "single" / "step1")  # one ok row per item
    acc = cli("assemble", "--items", str(pool), "--results", str(res))
    assert acc.returncode == 0, acc.stderr
    lines = (res / "run_accounting.csv").read_text().splitlines()
    head, row = lines[0].split(","), lines[1].split(",")
    assert dict(zip(head, row, strict=True))["items_ok"] == str(len(ok_rows(res / "step1")))
