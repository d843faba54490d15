"""An item whose clip the store failed (or that a folder's normalization skips) is told why, not to
run the normalization again: a rerun changes nothing, and the line sent the user round in circles."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from video_helpers import item_line

from benchcheck.cli import main
from benchcheck.video.synth import make_test_video


def test_failed_and_skipped_clips_say_why(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    make_test_video(videos / "good.mp4", 34, fps=2.0, width=64, height=36)
    (videos / "broken.mp4").write_bytes(b"not a video at all")
    (videos / "empty.webm").write_bytes(b"")
    make_test_video(videos / ".hidden.mp4", 36, fps=2.0, width=64, height=36)  # not good.mp4 by content
    items = tmp_path / "bench.jsonl"
    items.write_text("".join(item_line(k, v) for k, v in enumerate(["good.mp4", "broken.mp4", "empty.webm",
                                                                    ".hidden.mp4"])))
    out = tmp_path / "proj"
    res = CliRunner().invoke(main, ["init", "--videos", str(videos), "--items", str(items), "--out", str(out),
                                    "--no-progress"], catch_exceptions=False)
    assert res.exit_code == 1, res.output  # a source failed
    lines = {line.split(": ")[2]: line for line in res.output.splitlines() if line.startswith("no video: ")}
    assert set(lines) == {"q1", "q2", "q3"}
    assert "could not be normalized: not a readable video" in lines["q1"]
    assert "could not be normalized: empty file (0 bytes)" in lines["q2"]
    assert "run 'benchcheck videos normalize" not in lines["q1"] + lines["q2"]
    hidden = videos / ".hidden.mp4"
    assert f"run 'benchcheck videos normalize {hidden.resolve()} --store {out / 'store'}'" in lines["q3"]
    # the command named does store it, and the item then reaches its video
    again = CliRunner().invoke(main, ["videos", "normalize", str(hidden.resolve()), "--store", str(out / "store"),
                                      "--no-progress"], catch_exceptions=False)
    assert again.exit_code == 0, again.output
    stats = CliRunner().invoke(main, ["items", "stats", str(items), "--store", str(out / "store"),
                                      "--videos", str(videos)], catch_exceptions=False)
    assert "2 with a video found, 0 not normalized yet, 2 not found" in stats.output, stats.output
