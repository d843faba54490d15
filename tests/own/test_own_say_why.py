"""Runs that can do nothing say why per cause and exit 2; a run that did what it could exits 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from own_helpers import bc, item, make_clips, write_items, write_rules

from benchcheck.store import read_rows


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """raw/ clips, store/, frames/ (v32) and items naming the clips by file name (one names none)."""
    root = tmp_path_factory.mktemp("why")
    make_clips(root / "raw")
    assert bc("videos", "normalize", root / "raw", "--store", root / "store", "--no-progress").exit_code == 0
    write_items(root / "mine.jsonl", [item(k, f"clip{k % 3}.mp4") for k in range(4)] + [item(4, "gone.mp4")])
    write_items(root / "novideo.jsonl", [item(10 + k, "gone.mp4") for k in range(3)])
    r = bc("frames", "extract", "--store", root / "store", "--items", root / "mine.jsonl", "--videos", root / "raw",
           "--out", root / "frames", "--no-progress")
    assert r.exit_code == 0, r.output
    write_rules(root / "rules.json")
    return root


def screen(p: Path, items: str, results: Path, step: int, *extra: str | Path):  # type: ignore[no-untyped-def]
    return bc("screen", "--items", p / items, "--results", results, "--step", str(step), "--engine", "scripted",
              "--rules", p / "rules.json", "--no-progress", *extra)


def test_step3_before_step1(proj: Path, tmp_path: Path) -> None:
    r = screen(proj, "mine.jsonl", tmp_path / "res", 3, "--frames", proj / "frames", "--videos", proj / "raw")
    assert r.exit_code == 2
    # The item without a video waits for step 1 too: the first cause along the chain counts.
    assert "step 3: 5 items wait for step 1, which has not decided them yet: run it first" in r.stdout
    assert "nothing was done" in r.stderr and not (tmp_path / "res" / "step3").exists()
    plan = screen(proj, "mine.jsonl", tmp_path / "res", 3, "--frames", proj / "frames", "--videos", proj / "raw",
                  "--plan-only")
    assert plan.exit_code == 0 and "WAITING_EARLIER=5" in plan.stdout and "REMAINING_TOTAL=0" in plan.stdout
    assert "why: step 3: 5 items wait for step 1" in plan.stderr


def test_a_frames_folder_that_does_not_exist(proj: Path, tmp_path: Path) -> None:
    r = screen(proj, "mine.jsonl", tmp_path / "res", 2, "--frames", tmp_path / "nosuch")
    assert r.exit_code == 2 and "--frames" in r.stderr and "no such folder" in r.stderr
    assert not (tmp_path / "res" / "failures.jsonl").exists()  # no missing-frame failures recorded
    r = screen(proj, "mine.jsonl", tmp_path / "res", 2)
    assert r.exit_code == 2 and "step 2 shows frames: give --frames DIR" in r.stderr


def test_every_item_without_a_video(proj: Path, tmp_path: Path) -> None:
    assert screen(proj, "novideo.jsonl", tmp_path / "res", 1).exit_code == 0
    r = screen(proj, "novideo.jsonl", tmp_path / "res", 2, "--frames", proj / "frames", "--videos", proj / "raw")
    assert r.exit_code == 2
    assert "no video: " in r.stderr and "q10: no such video file" in r.stderr
    assert "step 2: 3 items reach no video" in r.stdout


def test_a_run_that_did_what_it_could_exits_0_and_all_done_says_so(proj: Path, tmp_path: Path) -> None:
    res = tmp_path / "res"
    assert screen(proj, "mine.jsonl", res, 1).exit_code == 0
    args = ("--frames", proj / "frames", "--store", proj / "store", "--videos", proj / "raw")
    r = screen(proj, "mine.jsonl", res, 2, *args)
    assert r.exit_code == 0, r.output
    assert "note: step 2: 1 item reaches no video" in r.stdout and "4 ok" in r.stdout
    assert {row["item_id"] for f in (res / "step2").glob("*.jsonl") for row in read_rows(f)} == {
        "q0", "q1", "q2", "q3"}
    again = screen(proj, "mine.jsonl", res, 2, *args)
    assert again.exit_code == 0 and "nothing left to run" in again.stdout


def test_frames_extract_with_no_video(proj: Path, tmp_path: Path) -> None:
    r = bc("frames", "extract", "--store", proj / "store", "--items", proj / "novideo.jsonl", "--out",
           tmp_path / "f", "--no-progress")
    assert r.exit_code == 2 and "nothing to extract" in r.stderr and "q10" in r.stderr
    (tmp_path / "empty").mkdir()
    r = bc("frames", "extract", "--store", tmp_path / "empty", "--out", tmp_path / "f", "--no-progress")
    assert r.exit_code == 2 and "not a normalized store" in r.stderr and "videos normalize" in r.stderr
    (tmp_path / "empty" / "normalized").mkdir()  # a store that normalize made with nothing in it
    r = bc("frames", "extract", "--store", tmp_path / "empty", "--out", tmp_path / "f", "--no-progress")
    assert r.exit_code == 2 and "holds no normalized video" in r.stderr and "videos normalize" in r.stderr
    r = bc("frames", "extract", "--store", proj / "store", "--items", proj / "mine.jsonl", "--videos", proj / "raw",
           "--out", proj / "frames", "--no-progress")  # all cached: done, not an error
    assert r.exit_code == 0 and "3 already cached" in r.stdout


def test_items_that_name_no_video_skip_the_visual_steps(proj: Path, tmp_path: Path) -> None:
    """A text-only benchmark run through 1..6 is not an error at the visual steps: they are skipped."""
    write_items(tmp_path / "text.jsonl", [item(20 + k, None) for k in range(3)])
    res = tmp_path / "res"
    assert bc("screen", "--items", tmp_path / "text.jsonl", "--results", res, "--step", "1", "--engine", "scripted",
              "--rules", proj / "rules.json", "--no-progress").exit_code == 0
    r = bc("screen", "--items", tmp_path / "text.jsonl", "--results", res, "--step", "2", "--engine", "scripted",
           "--rules", proj / "rules.json", "--no-progress")
    assert r.exit_code == 0 and "step 2: 3 items name no video: the visual steps skip them" in r.stdout
