"""The ``benchcheck videos`` and ``benchcheck frames`` commands, run as a user would."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.items import key_video_id
from benchcheck.video.cache import load_cached_jpegs, read_frames_json
from benchcheck.video.extract import extract_jpegs
from benchcheck.video.index import read_index
from benchcheck.video.synth import make_test_video


def _bc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=300)


def test_normalize_a_folder_with_a_broken_file_then_extract(tmp_path: Path) -> None:
    src = tmp_path / "raw"
    for i in range(3):
        make_test_video(src / f"clip{i}.mp4", 20 + 10 * i, fps=4.0, width=128, height=72)
    (src / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"garbage" * 50)
    store = tmp_path / "store"
    r = _bc("videos", "normalize", str(src), "--store", str(store), "--workers", "2")
    assert r.returncode == 1, r.stderr
    assert "3 normalized" in r.stdout and "1 failed" in r.stdout
    assert "broken.mp4" in r.stderr and "not a readable video" in r.stderr
    failures = [json.loads(line) for line in (store / "failures.jsonl").read_text().splitlines()]
    assert [Path(f["source"]).name for f in failures] == ["broken.mp4"]
    index = read_index(store / "index.jsonl")
    assert set(index) == {f"local::raw::clip{i}.mp4" for i in range(3)}
    again = _bc("videos", "normalize", str(src), "--store", str(store), "--no-progress")
    assert "3 skipped" in again.stdout

    items = tmp_path / "items.jsonl"
    rows = [
        {"item_id": "b_0", "bench": "b", "question": "q?", "options": ["x", "y"], "answer": 0,
         "video_id": index["local::raw::clip0.mp4"]},
        # written before normalization: only the key; resolved through the store's index
        {"item_id": "b_1", "bench": "b", "question": "q?", "options": ["x", "y"], "answer": 1,
         "video_key": "local::raw::clip1.mp4"},
        {"item_id": "b_2", "bench": "b", "question": "q?", "options": ["x", "y"], "answer": 1},
    ]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "pool_frames"
    r = _bc("frames", "extract", "--store", str(store), "--items", str(items), "--plan", "v32", "--out", str(out),
            "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert "2 videos extracted (64 frames)" in r.stdout and "1 items have no normalized video" in r.stderr
    vid = index["local::raw::clip1.mp4"]
    assert key_video_id("local::raw::clip1.mp4") != vid
    assert read_frames_json(out, vid)["plan"] == "v32"
    assert load_cached_jpegs(out, vid) == extract_jpegs(store, vid, "v32").jpegs
    r = _bc("frames", "extract", "--store", str(store), "--items", str(items), "--out", str(out), "--no-progress")
    assert "2 already cached" in r.stdout


def test_frames_extract_without_items_takes_the_whole_store(store: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["frames", "extract", "--store", str(store), "--plan", "fps1_s224",
                                    "--out", str(tmp_path), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "plan v_fps1_s224:" in res.output and "0 failed" in res.output


def test_bad_plan_is_a_usage_error(store: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["frames", "extract", "--store", str(store), "--plan", "v_31x",
                                    "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown frame plan" in res.output


def test_help_has_examples() -> None:
    for args in (["videos", "normalize", "--help"], ["frames", "extract", "--help"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0 and re.search(r"Example:\s*\n\s*benchcheck " + args[0], res.output)
