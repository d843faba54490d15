"""``init`` and ``items link`` print the videos summary once (on stdout), not again on stderr
after the 'no video:' lines when some item reaches no video."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from video_helpers import item_line

from benchcheck.cli import main
from benchcheck.video.synth import make_test_video


def test_init_and_items_link_say_the_summary_once(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    make_test_video(videos / "good.mp4", 34, fps=2.0, width=64, height=36)
    items = tmp_path / "bench.jsonl"
    items.write_text(item_line(0, "good.mp4") + item_line(1, "nope.mp4"))
    out = tmp_path / "proj"
    res = CliRunner().invoke(main, ["init", "--videos", str(videos), "--items", str(items), "--out", str(out),
                                    "--no-progress"], catch_exceptions=False)
    assert "no video: " in res.output  # q1 is told
    assert res.output.count("1 items with a video found") == 1, res.output
    link = CliRunner().invoke(main, ["items", "link", str(items), "--store", str(out / "store"), "--videos",
                                     str(videos), "--out", str(tmp_path / "linked")], catch_exceptions=False)
    assert "no video: " in link.output
    assert link.output.count("1 items with a video found") == 1, link.output
