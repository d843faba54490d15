"""Executors call run_task: the local runner per unit, launch's clients through job files (no
`screen` argument strings), the same rows as `screen`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from screen_helpers import cli, decisions, write_rules

from benchcheck.cli.common import load_items_reporting
from benchcheck.executors.registry import run_screen_job as run_job
from benchcheck.screen.job import ShardJob


@pytest.fixture()
def pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "items"


def test_launch_clients_are_job_files_run_through_run_task(tmp_path: Path) -> None:
    from benchcheck.launch.host import LaunchPlan, client_argv, client_job
    from benchcheck.launch.servers import ServerOptions, server_specs

    opts = ServerOptions(model="m", served_name="vlm", revision="abc")
    base = ShardJob(items=("items/",), results="res", step=1, bench="A,B", limit=5)
    plan = LaunchPlan(step=2, n_servers=2, gpus=("0", "1"), options=opts, job=base, workers=16,
                      logs=tmp_path, shard=((1, 3),))
    specs = server_specs(2, opts, ["0", "1"])
    job = client_job(plan, specs[1])
    assert (job.step, job.engine, job.endpoints, job.model, job.revision, job.workers, job.shard, job.gpus) == (
        2, "openai", (specs[1].url,), "vlm", "abc", 16, "1/3:1/2", 1)
    assert (job.items, job.results, job.bench, job.limit) == (("items/",), "res", "A,B", 5)
    path = job.write(tmp_path / "c.job.json")
    assert ShardJob.read(path) == job
    argv = client_argv(path)
    assert "screen" not in argv and argv[-3:] == ["task", "run", str(path)]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**job.to_json(), "surprise": 1}))
    r = cli("task", "run", str(bad))
    assert r.returncode == 2 and "unknown fields surprise" in r.stderr and "Traceback" not in r.stderr


def test_a_job_file_gives_the_rows_screen_gives(pool: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import benchcheck.screen.runner as runner

    rules = write_rules(tmp_path / "rules.json")
    r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(tmp_path / "cli"), "--engine",
            "scripted", "--rules", str(rules), "--no-progress")
    assert r.returncode == 0, r.stderr
    job = ShardJob(items=(str(pool),), results=str(tmp_path / "job"), step=1, engine="scripted", rules=str(rules),
                   progress=False, max_unit=50)
    worked: list[str] = []
    real = runner.run_task_async

    async def spy(*args: Any, **kwargs: Any) -> Any:
        worked.append(args[1].name)
        return await real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_task_async", spy)
    lines: list[str] = []
    assert run_job(job, load_items_reporting, lines.append) == 0
    assert len(worked) > 3 and any(".p" in w for w in worked)  # one run_task per unit
    assert decisions(tmp_path / "job" / "step1") == decisions(tmp_path / "cli" / "step1")
    assert json.loads((tmp_path / "job" / "step1" / "run_spec.json").read_text())["n_perm"] == 4
    done = cli("task", "run", str(job.write(tmp_path / "j.json")), "--plan-only")
    assert done.returncode == 0 and done.stdout.startswith("REMAINING_TOTAL=0\n") and "HELD_BY_OTHER=0" in done.stdout


def test_steps_with_frames_send_each_videos_questions_together() -> None:
    from benchcheck.items import Item
    from benchcheck.screen.steps import default_run_spec
    from benchcheck.screen.task import call_order

    videos = ["v2", "v1", "v2", None, "v1", "v3", "v2"]
    items = [Item(f"i{k}", "B", f"q{k}?", ["a", "b"], 0, video_id=v) for k, v in enumerate(videos)]
    todo = [(it, k) for k, it in enumerate(items)]
    for step in (2, 3, 5, 6):  # frames: each video's questions next to each other, in the order listed
        got = [k for _, k in call_order(default_run_spec(step), todo, lambda t: t[0])]
        assert got == [3, 1, 4, 0, 2, 6, 5], step
    for step in (1, 4):  # no frames: as listed
        assert [k for _, k in call_order(default_run_spec(step), todo, lambda t: t[0])] == list(range(len(items)))

