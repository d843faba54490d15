"""A source whose file name is not UTF-8 (a Latin-1 name on a Linux disk) is normalized like any
other: its key and path went into meta.json and the index as text with no UTF-8 form, and the
writer raised, the file failed and its failure row took the whole run down with a traceback."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import done_rows
from benchcheck.video.meta import read_meta
from benchcheck.video.synth import make_test_video


def test_non_utf8_file_name_is_stored_and_skipped_next_time(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    made = make_test_video(tmp_path / "clip.mp4", 4, fps=2.0, width=64, height=36)
    latin1 = Path(os.fsdecode(os.path.join(os.fsencode(videos), b"caf\xe9.mp4")))
    videos.mkdir()
    made.rename(latin1)
    make_test_video(videos / "z_after.mp4", 6, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    args = ["videos", "normalize", str(videos), "--store", str(store), "--no-progress"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert "2 normalized" in first.output
    rows = done_rows(store / "index.jsonl")
    key = f"local::videos::{latin1.name}"
    assert set(rows) == {key, "local::videos::z_after.mp4"}
    assert read_meta(store, str(rows[key]["content_hash"])).source["path"] == str(latin1.resolve())
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert "2 skipped" in again.output
