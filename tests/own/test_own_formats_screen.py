"""A lab's own CSV through init and the visual steps: no item leaves a step without a line saying so."""

from __future__ import annotations

import csv
from pathlib import Path

from own_helpers import bc, make_clips, write_rules


def test_a_row_with_an_empty_video_cell_is_named_at_the_visual_steps(tmp_path: Path) -> None:
    make_clips(tmp_path / "videos", 2)
    items = tmp_path / "mine.csv"
    with items.open("w", newline="", encoding="utf-8-sig") as f:  # the video cell of q2 was left empty
        csv.writer(f, lineterminator="\r\n").writerows(
            [["item_id", "question", "option_0", "option_1", "option_2", "answer", "video"],
             ["q0", "What turns?", "a cup", "a ball", "a box", "1", "clip0.mp4"],
             ["q1", "What stops?", "a cup", "a ball", "a box", "2", "clip1.mp4"],
             ["q2", "What falls?", "a cup", "a ball", "a box", "0", ""]])
    proj = tmp_path / "proj"
    r = bc("init", "--videos", tmp_path / "videos", "--items", items, "--out", proj, "--no-progress")
    assert r.exit_code == 0, r.output
    rules = write_rules(tmp_path / "rules.json")
    for step in (1, 2):
        r = bc("screen", "--items", proj / "items", "--results", proj / "results", "--frames", proj / "frames",
               "--step", str(step), "--engine", "scripted", "--rules", rules, "--no-progress")
        assert r.exit_code == 0, r.output
    # Step 2 runs q0 and q1; q2 reaches no frames: the run says so even though it had work to do.
    assert "note: step 2: 1 item names no video: the visual steps skip it" in r.output
