"""A --token-budget too small for one frame of an fps condition: each of its cells is a failure of
the frame plan that names the budget, never an answer. Before, the plan kept zero frames and the
model answered the visual condition blind, written as an ``ok`` row the analysis counted."""

from __future__ import annotations

from pathlib import Path

from sweep_helpers import dry_rows, item, scripted_run, stored_video, write_items


def test_a_budget_without_room_for_one_frame_fails_the_fps_cells(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "v40", 40, 320, 240)
    items = write_items(tmp_path / "items", [item("Tiny", 0, "v40"), item("Tiny", 1, "v40")])
    # a 4:3 frame at s224 is 299x224, 76 tokens; 1,550 - 1,500 reserve leaves 50: no frame fits
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(tmp_path / "res"),
              "--conds", "v_1,v_fps1_s224", "--token-budget", "1550"]

    rows = dry_rows(common)
    todo, _na, _reuse, fail = rows[("Tiny", "v_fps1_s224")][:4]
    assert (todo, fail) == ("0", "2"), rows
    assert rows[("Tiny", "v_1")][0] == "2", rows

    written, failures = scripted_run(tmp_path, common)
    fps = [r for r in written if ",v_fps1_s224," in r]  # error rows naming the frame plan, no answer
    assert len(fps) == 2 and all(",error,," in r and '""frame plan""' in r and "token budget 1550" in r for r in fps)
    assert len([r for r in written if ",v_1," in r]) == 2
    assert {f["condition"] for f in failures} == {"v_fps1_s224"}
    assert all("token budget 1550 leaves no room for one" in f["message"] for f in failures), failures
