"""An item whose video path holds a NUL byte is told so: the line said "empty video path" for a
path that was not empty."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from video_helpers import item_line

from benchcheck.cli import main
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video


def test_nul_in_a_video_path_is_named(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    make_test_video(videos / "a.mp4", 4, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    normalize_videos([videos], store)
    items = tmp_path / "bench.jsonl"
    items.write_text(item_line(0, "a.mp4") + item_line(1, "a.mp4\x00.txt"))
    res = CliRunner().invoke(main, ["items", "stats", str(items), "--store", str(store), "--videos", str(videos)])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if "q1" in x)
    assert "NUL byte" in line and "empty" not in line
