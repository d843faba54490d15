"""Items naming clips that the videos folder holds through links (to shared storage, as labs keep
them) reach their frames once ``init`` normalized that folder; a link out of the folder that the
store does not hold for it is still refused, and nothing outside the folder is read."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from video_helpers import item_line

from benchcheck.cli import main
from benchcheck.items import load_items
from benchcheck.video.resolve import resolve_items
from benchcheck.video.synth import make_test_video


def test_linked_clips_reach_their_frames(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    make_test_video(shared / "far.mp4", 34, fps=2.0, width=64, height=36)
    make_test_video(shared / "dir" / "deep.mp4", 36, fps=2.0, width=64, height=36)
    videos = tmp_path / "videos"
    make_test_video(videos / "near.mp4", 38, fps=2.0, width=64, height=36)
    (videos / "far.mp4").symlink_to(shared / "far.mp4")
    (videos / "more").symlink_to(shared / "dir", target_is_directory=True)
    items = tmp_path / "bench.jsonl"
    items.write_text(item_line(0, "near.mp4") + item_line(1, "far.mp4") + item_line(2, "more/deep.mp4"))
    out = tmp_path / "proj"
    res = CliRunner().invoke(main, ["init", "--videos", str(videos), "--items", str(items), "--out", str(out),
                                    "--no-progress"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "no video:" not in res.output
    linked = [json.loads(line) for line in (out / "items" / "bench.jsonl").read_text().splitlines()]
    assert len({r["video_id"] for r in linked}) == 3
    assert all((out / "frames" / r["video_id"] / "frames.json").is_file() for r in linked)


def test_a_link_out_that_the_folder_never_stored_is_refused(tmp_path: Path) -> None:
    outside = make_test_video(tmp_path / "outside" / "secret.mp4", 34, fps=2.0, width=64, height=36)
    videos = tmp_path / "videos"
    make_test_video(videos / "near.mp4", 36, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(videos), "--store", str(store), "--no-progress"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    (videos / "late.mp4").symlink_to(outside)  # planted after the folder was normalized
    items = tmp_path / "bench.jsonl"
    items.write_text(item_line(0, "late.mp4"))
    resolved = resolve_items(load_items([items]).items, store, videos)
    (r,) = resolved.resolutions
    assert r.status == "refused" and "resolves outside the videos folder" in r.reason
