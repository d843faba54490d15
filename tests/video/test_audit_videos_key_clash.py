"""Two source folders of the same name give their clips the same keys: the second folder's clip
was dropped without a word (the run said every source was handled and exited 0). It is told
apart from the same file given twice, which is still dropped quietly."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import done_rows
from benchcheck.video.synth import make_test_video


def test_same_named_folders_say_which_clip_was_left_out(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "clips", tmp_path / "b" / "clips"
    make_test_video(a / "x.mp4", 4, fps=2.0, width=64, height=36)
    make_test_video(b / "x.mp4", 6, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(a), str(b), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    assert "1 normalized" in res.output and "1 failed" in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("failed: "))
    assert line.startswith(f"failed: {b / 'x.mp4'}: ") and str(a / "x.mp4") in line
    assert {k: r["source"] for k, r in done_rows(store / "index.jsonl").items()} == {
        "local::clips::x.mp4": str(a / "x.mp4")}
    # the same file named twice (its folder and itself) is one source, not a clash
    again = CliRunner().invoke(main, ["videos", "normalize", str(a), str(a / "x.mp4"), "--store", str(store),
                                      "--no-progress"])
    assert again.exit_code == 0, again.output
    assert "1 skipped" in again.output and "0 failed" in again.output
