"""The screening runner end to end through the CLI, with the scripted engine standing in for a VLM."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from screen_helpers import cli, decisions, ok_rows, popen, torn_lines, write_rules

from benchcheck.store import read_rows


@pytest.fixture()
def pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "items"


def screen(items: Path, results: Path, rules: Path, *extra: str, step: int = 1) -> None:
    r = cli("screen", "--items", str(items), "--step", str(step), "--results", str(results), "--engine",
            "scripted", "--rules", str(rules), "--no-progress", *extra)
    assert r.returncode == 0, r.stderr


def test_step1_rows_keep_what_rederives_the_decision(pool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.json")
    screen(pool, tmp_path / "res", rules)
    rows = ok_rows(tmp_path / "res" / "step1")
    assert len(rows) == 269
    r = rows["DemoJson_0"]
    assert r["n_perm"] == 4 and len(r["perms"]) == 4 and len(r["lp"]) == 4 and len(r["prompt_tokens"]) == 4
    assert r["model"].startswith("scripted") and r["config_hash"] and r["step_name"] == "blind"
    from benchcheck.protocol import decide_permutations, gold_position, permutations_for

    assert r["perms"] == permutations_for("DemoJson_0", 4)
    d = decide_permutations(r["lp"], [gold_position(p, r["answer"]) for p in r["perms"]])
    assert d.removed == r["removed"] and d.picks == r["picks"]
    removed = {i for i, x in rows.items() if x["removed"]}
    assert removed and all("DemoJson" in i or "DemoOpen" in i for i in removed)
    out = cli("screen", "--items", str(pool), "--step", "1", "--results", str(tmp_path / "res"), "--plan-only")
    assert out.stdout.startswith("REMAINING_TOTAL=0\n")


def test_kill_9_mid_step_then_rerun_equals_uninterrupted(pool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.json")
    screen(pool, tmp_path / "clean", rules)
    slow = write_rules(tmp_path / "slow.json", delay_s=0.01)
    res = tmp_path / "killed"
    p = popen("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--engine", "scripted",
              "--rules", str(slow), "--no-progress", "--batch-items", "2")
    deadline = time.time() + 60
    while time.time() < deadline:
        if sum(1 for f in (res / "step1").glob("*.jsonl") for _ in read_rows(f)) >= 40:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    partial = len(ok_rows(res / "step1"))
    assert 0 < partial < 269
    assert torn_lines(res / "step1") <= 1
    screen(pool, res, slow)
    assert decisions(res / "step1") == decisions(tmp_path / "clean" / "step1")


def test_two_shards_at_once_and_slurm_array_tasks(pool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.json", delay_s=0.002)
    res = tmp_path / "two"
    procs = [popen("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--engine", "scripted",
                   "--rules", str(rules), "--no-progress", "--shard", f"{i}/2") for i in range(2)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    assert len(ok_rows(res / "step1")) == 269
    # The tasks of `sbatch --array=1-3` as local processes with the Slurm variables set.
    arr = tmp_path / "array"
    for task in (1, 2, 3):
        env = {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "3",
               "SLURM_ARRAY_TASK_COUNT": "3"}
        r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(arr), "--engine", "scripted",
                "--rules", str(rules), "--no-progress", "--shard", "auto", "--max-unit", "40", env=env)
        assert r.returncode == 0, r.stderr
    assert decisions(arr / "step1") == decisions(res / "step1")
    assert any(".p" in f.name for f in (arr / "step1").iterdir())  # big benchmarks were split in parts


def test_errors_are_retried_then_fail_and_the_run_finishes(pool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.json", [
        {"match": "Question: How many", "error": {"status": 500, "message": "boom"}},
        {"match": "", "letters": {"A": -1.0, "B": -1.1, "C": -1.2, "D": -1.3, "E": -2}},
    ])
    res = tmp_path / "res"
    r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(rules), "--no-progress")
    assert r.returncode == 0, r.stderr
    errs = [x for f in (res / "step1").glob("*.jsonl") for x in read_rows(f) if x.get("status") == "error"]
    counts: dict[str, int] = {}
    for e in errs:
        counts[e["item_id"]] = counts.get(e["item_id"], 0) + 1
    assert counts and set(counts.values()) == {3}  # retried within the run up to the limit
    assert "failed: " in r.stdout
    plan = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--plan-only").stdout
    assert "REMAINING_TOTAL=0" in plan and f"FAILED_TOTAL={len(counts)}" in plan
    # A rerun does not touch failed items again.
    screen(pool, res, rules)
    errs_after = [x for f in (res / "step1").glob("*.jsonl") for x in read_rows(f) if x.get("status") == "error"]
    assert len(errs_after) == len(errs)


def test_missing_frames_go_to_failures_not_error_rows(tmp_path: Path) -> None:
    from benchcheck.demo.items import write_demo_items

    pool = tmp_path / "vitems"
    write_demo_items(pool, video_ids=["0123456789abcdef", "fedcba9876543210"])
    rules = write_rules(tmp_path / "rules.json")
    res = tmp_path / "res"
    screen(pool, res, rules)
    frames = tmp_path / "frames"
    frames.mkdir()
    screen(pool, res, rules, "--frames", str(frames), step=2)
    fails = list(read_rows(res / "failures.jsonl"))
    assert fails and all(f["reason"] == "missing frame folder" and f["step"] == 2 for f in fails)
    assert not list((res / "step2").glob("*.jsonl")) if (res / "step2").exists() else True
    screen(pool, res, rules, "--frames", str(frames), step=2)
    assert len(list(read_rows(res / "failures.jsonl"))) == len(fails)  # recorded once
    plan = cli("screen", "--items", str(pool), "--step", "2", "--results", str(res), "--frames", str(frames),
               "--plan-only").stdout
    assert f"MISSING_FRAMES={len(fails)}" in plan and "REMAINING_TOTAL=0" in plan


def test_a_refused_model_stops_the_run_without_failing_items(pool: Path, tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.json", [
        {"match": "", "error": {"status": 404, "message": "The model `x` does not exist."}}])
    res = tmp_path / "res"
    for _ in range(4):
        r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--engine", "scripted",
                "--rules", str(rules), "--no-progress", "--batch-items", "4", "--workers", "1")
        assert r.returncode == 3 and "refused the run" in r.stdout
    plan = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--plan-only").stdout
    assert "FAILED_TOTAL=0" in plan and "REMAINING_TOTAL=269" in plan


def test_a_cache_without_the_whole_grid_is_missing_frames(tmp_path: Path) -> None:
    from benchcheck.demo.items import write_demo_items
    from benchcheck.demo.videos import make_demo_videos
    from benchcheck.video.batch import extract_many
    from benchcheck.video.store import normalize_videos

    report = normalize_videos(make_demo_videos(tmp_path / "v", n=1), tmp_path / "store")
    vid = report.outcomes[0].content_hash
    assert vid
    extract_many(tmp_path / "store", [vid], "mid", tmp_path / "mid")
    write_demo_items(tmp_path / "items", video_ids=[vid])
    args = ["screen", "--items", str(tmp_path / "items"), "--step", "2", "--chain", "2,3", "--results",
            str(tmp_path / "res"), "--plan-only", "--frames"]
    mid_only = cli(*args, str(tmp_path / "mid")).stdout
    extract_many(tmp_path / "store", [vid], "v32", tmp_path / "v32")
    whole = cli(*args, str(tmp_path / "v32")).stdout
    n = int(whole.split("REMAINING_TOTAL=")[1].split()[0])
    assert n > 0 and "MISSING_FRAMES=0" in whole
    assert "REMAINING_TOTAL=0" in mid_only and f"MISSING_FRAMES={n}" in mid_only
