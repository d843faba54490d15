"""``sweep run`` exit codes by outcome: a run that answers no cell and fails some says why in one
line and exits 1 (rows already written kept, a rerun too); some answered and some failed exits 0
and names the failures last (real mp4 files, the scripted engine and the tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

from sweep_helpers import item, stored_video, sweep_cli, write_items, write_rules

from benchcheck.video.meta import video_dir


def _setup(tmp: Path, corrupt: bool) -> list[str]:
    store = tmp / "store"
    for vid in ("v1", "v2"):
        stored_video(store, vid, 40, 320, 180)
        if corrupt:
            (video_dir(store, vid) / "video.mp4").write_bytes(b"not an mp4")
    write_items(tmp / "items", [item("Alpha", 0, "v1"), item("Alpha", 1, "v2")])
    return ["--items", str(tmp / "items"), "--store", str(store), "--results", str(tmp / "res"),
            "--decode-workers", "0", "--no-progress"]


def _run(tmp: Path, common: list[str], *extra: str, rules: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
    r = write_rules(tmp / "rules.json", rules or [{"match": "", "reply": "The answer is A."}])
    out = sweep_cli("run", *common, "--engine", "scripted", "--rules", str(r), *extra)
    assert "Traceback" not in out.stderr
    return out


def _why(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_every_video_unreadable_exits_1_with_the_reason_and_so_does_the_rerun(tmp_path: Path) -> None:
    common = _setup(tmp_path, corrupt=True)
    run = _run(tmp_path, common, "--conds", "v_1,v_8_s224")
    assert run.returncode == 1, run.stdout + run.stderr
    why = _why(run.stderr)
    assert "no cell answered: 4 cells failed" in why and "decode (4 cells" in why
    assert str(tmp_path / "res" / "data" / "logs" / "failures.jsonl") in why
    rows = (tmp_path / "res" / "sweep_rows" / "v_1" / "Alpha.jsonl").read_text().splitlines()
    assert rows and all(json.loads(x)["status"] == "error" for x in rows)  # the failure rows are kept
    again = _run(tmp_path, common, "--conds", "v_1,v_8_s224")  # every cell given up by the earlier run
    assert again.returncode == 1 and "decode (4 cells" in _why(again.stderr)
    assert (tmp_path / "res" / "sweep_rows" / "v_1" / "Alpha.jsonl").read_text().splitlines()[:len(rows)] == rows


def test_every_request_refused_by_the_engine_exits_1(tmp_path: Path) -> None:
    common = _setup(tmp_path, corrupt=False)
    run = _run(tmp_path, common, "--conds", "v_blind,v_1",
               rules=[{"match": "", "error": {"status": 500, "message": "model crashed"}}])
    assert run.returncode == 1
    assert "http 500 (4 cells, e.g. model crashed)" in _why(run.stderr)


def test_a_frame_plan_failing_for_every_item_exits_1(tmp_path: Path) -> None:
    common = _setup(tmp_path, corrupt=False)
    run = _run(tmp_path, common, "--conds", "v_fps1_s224", "--token-budget", "1550")
    assert run.returncode == 1
    assert "frame plan (2 cells, e.g. token budget 1550" in _why(run.stderr)
    lines = [json.loads(x) for x in (tmp_path / "res" / "data" / "logs" / "failures.jsonl").read_text().splitlines()]
    assert [f["kind"] for f in lines] == ["frame_plan"] * 2  # not "no_video": both videos are there


def test_some_answered_exits_0_naming_the_failures_last_and_a_done_rerun_stays_0(tmp_path: Path) -> None:
    common = _setup(tmp_path, corrupt=False)
    write_items(tmp_path / "items", [item("Alpha", 0, "v1"), item("Alpha", 1, "gone")])
    run = _run(tmp_path, common, "--conds", "v_blind,v_1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].startswith("sweep: 1 of 4 cells failed; most often no video (1 cell")
    write_items(tmp_path / "items", [item("Alpha", 0, "v1"), item("Alpha", 1, "v2")])
    ok = _run(tmp_path, common, "--conds", "v_blind,v_1")
    assert ok.returncode == 0 and "failed" not in ok.stdout, ok.stdout + ok.stderr
    again = _run(tmp_path, common, "--conds", "v_blind,v_1")  # every cell already done and ok
    assert again.returncode == 0 and "nothing to do" in again.stdout and "failed" not in again.stdout


def test_tiny_model_on_unreadable_videos_exits_1(tmp_path: Path, tiny_model: Path) -> None:
    common = _setup(tmp_path, corrupt=True)
    run = sweep_cli("run", *common, "--conds", "v_1", "--engine", "hf", "--model", str(tiny_model),
                    "--device", "cpu")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "decode (2 cells" in _why(run.stderr)
