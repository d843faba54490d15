"""Preconditions a new user meets: no hub access without --model, a port already taken, odd item files."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from screen_helpers import cli

from benchcheck.screen.steps import MODELS, STEPS


def _items(tmp_path: Path) -> Path:
    p = tmp_path / "items" / "T.jsonl"
    p.parent.mkdir()
    p.write_text("".join(json.dumps({"item_id": f"t{i}", "question": "Q?", "options": ["x", "y"], "answer": 0}) + "\n"
                         for i in range(3)))
    return p


def test_screen_without_model_and_without_the_hub_is_one_line_exit_2(tmp_path: Path) -> None:
    items = _items(tmp_path)
    env = {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
           "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}  # nothing cached, the hub unreachable
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(tmp_path / "res"), "--device", "cpu",
            "--no-progress", env=env)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    ref = MODELS[STEPS[1].model]
    assert repr(ref.name) in line and ref.revision in line and "pass --model DIR" in line
    assert "ConnectError" in line or "Connect" in line


def test_refused_launch_records_no_server(tmp_path: Path) -> None:
    items = _items(tmp_path)
    logs = tmp_path / "logs"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = cli("launch", "--step", "1", "--gpus", "1", "--server", "benchcheck", "--port0", str(port),
                "--items", str(items), "--results", str(tmp_path / "res"), "--logs", str(logs),
                "--model", str(tmp_path / "no-model"), "--server-timeout", "30")
    assert r.returncode == 2 and f"port {port} is already in use" in r.stderr, r.stdout + r.stderr
    params = logs / "launch_params.txt"
    assert not params.exists() or not [x for x in params.read_text().splitlines() if x and not x.startswith("#")]


def test_screen_takes_what_validate_takes(tmp_path: Path) -> None:
    """Names and ids validation refuses never reach the runner; the rest runs without a traceback."""
    p = tmp_path / "items" / "Odd.jsonl"
    p.parent.mkdir()
    rows = [{"item_id": "long", "bench": "b" * 300, "question": "Q", "options": ["x", "y"], "answer": 0},
            {"item_id": "path", "question": "Q", "options": ["x", "y"], "answer": 0, "video_id": "../normalized/x"},
            {"item_id": "ok", "question": "Q", "options": ["x", "y"], "answer": 0}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    v = cli("items", "validate", str(p))
    assert v.returncode == 1 and "too long for a file name" in v.stderr and "not a plain name" in v.stderr
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -0.1, "B": -3.0}}]))
    r = cli("screen", "--items", str(p.parent), "--step", "1", "--results", str(tmp_path / "res"), "--engine",
            "scripted", "--rules", str(rules), "--no-progress")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [json.loads(x)["item_id"] for x in (tmp_path / "res" / "step1" / "Odd.jsonl").read_text().splitlines()] == [
        "ok"]


def test_plan_of_a_csv_numbered_per_video_counts_only_truly_bad_items(tmp_path: Path) -> None:
    p = tmp_path / "NExTQA.csv"
    lines = ["video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4"]
    for v in range(100):
        for q in range(5):  # qid restarts at 0 for every video, as in NExT-QA's release
            question = "" if (v, q) == (7, 1) else f"why did the dog {q} bark in {v}?"
            lines.append(f"{5200 + v},900,640,480,{question},{q % 5},{q},CW,one,two,three,four,five")
    p.write_text("\n".join(lines) + "\n")
    r = cli("screen", "--items", str(p), "--step", "1", "--results", str(tmp_path / "res"), "--plan-only")
    assert r.returncode == 0, r.stderr
    assert "REMAINING_TOTAL=499" in r.stdout and "INVALID_ITEMS=1" in r.stdout
