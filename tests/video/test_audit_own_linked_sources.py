"""A videos folder with links, as a lab keeps one: a linked folder of clips is normalized, a link
loop ends, and a link whose target is gone fails on its own line (each was skipped without a word)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.synth import make_test_video


def test_linked_folder_loop_and_dangling_link(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    make_test_video(shared / "far.mp4", 6, fps=2.0, width=64, height=36)
    videos = tmp_path / "videos"
    make_test_video(videos / "near.mp4", 8, fps=2.0, width=64, height=36)
    (videos / "more").symlink_to(shared, target_is_directory=True)
    (videos / "again").symlink_to(videos, target_is_directory=True)  # a loop back to the top
    (videos / "gone.mp4").symlink_to(tmp_path / "deleted.mp4")
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(videos), "--store", str(store), "--no-progress"],
                             catch_exceptions=False)
    assert res.exit_code == 1, res.output
    keys = {json.loads(line)["key"] for line in (store / "index.jsonl").read_text().splitlines()}
    assert keys == {"local::videos::near.mp4", "local::videos::more/far.mp4"}
    failed = [json.loads(line) for line in (store / "failures.jsonl").read_text().splitlines()]
    assert [f["key"] for f in failed] == ["local::videos::gone.mp4"]
    assert "does not exist" in failed[0]["reason"]
    assert f"failed: {videos / 'gone.mp4'}: a link to {tmp_path / 'deleted.mp4'}" in res.output
