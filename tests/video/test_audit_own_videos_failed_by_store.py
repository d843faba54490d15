"""An item naming its clip by a relative path, read with ``--store`` and no ``--videos`` (the
commands ``init`` prints), whose clip the store failed: the line says why it failed. It told the
user to normalize a folder they had normalized, hiding the reason (no video stream, corrupt)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from video_helpers import item_line

from benchcheck.cli import main
from benchcheck.video.synth import make_test_video


def test_sweep_without_videos_says_why_a_clip_failed(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    make_test_video(videos / "good.mp4", 34, fps=2.0, width=64, height=36)
    (videos / "broken.mp4").write_bytes(b"not a video at all")
    items = tmp_path / "bench.jsonl"
    items.write_text("".join(item_line(k, v) for k, v in enumerate(["good.mp4", "broken.mp4", "gone.mp4"])))
    out = tmp_path / "proj"
    res = CliRunner().invoke(main, ["init", "--videos", str(videos), "--items", str(items), "--out", str(out),
                                    "--no-progress"], catch_exceptions=False)
    assert res.exit_code == 1, res.output
    store = out / "store"
    sweep = CliRunner().invoke(main, ["sweep", "run", "--items", str(out / "items"), "--store", str(store),
                                      "--results", str(tmp_path / "sweep"), "--engine", "reference",
                                      "--conds", "v_1", "--decode-workers", "0", "--no-progress"],
                               catch_exceptions=False)
    assert sweep.exit_code == 0, sweep.output
    lines = {line.split(": ")[2]: line for line in sweep.output.splitlines() if line.startswith("no video: ")}
    assert set(lines) == {"q1", "q2"}, sweep.output
    assert "video 'broken.mp4' could not be normalized: not a readable video" in lines["q1"]
    assert f"({store}/failures.jsonl)" in lines["q1"]
    assert "normalize that folder" not in lines["q1"]
    # a clip nobody normalized is still sent to normalize its folder
    assert "video 'gone.mp4' is not in" in lines["q2"] and "normalize that folder" in lines["q2"]
    # replaced since it failed: the old reason no longer holds
    (videos / "broken.mp4").write_bytes(b"another broken file, longer than before")
    again = CliRunner().invoke(main, ["sweep", "run", "--items", str(out / "items"), "--store", str(store),
                                      "--results", str(tmp_path / "sweep2"), "--engine", "reference",
                                      "--conds", "v_1", "--decode-workers", "0", "--no-progress"],
                               catch_exceptions=False)
    assert "video 'broken.mp4' is not in" in again.output, again.output
