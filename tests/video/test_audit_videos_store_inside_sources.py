"""A store inside the folder being normalized (``videos normalize . --store store``): every run
walked the store too and stored the last run's outputs again as new videos, so the store grew
with each run and its index listed its own files as sources."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import done_rows
from benchcheck.video.synth import make_test_video


def test_a_store_below_the_sources_is_not_a_source(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    make_test_video(proj / "a.mp4", 4, fps=2.0, width=64, height=36)
    store = proj / "store"
    args = ["videos", "normalize", str(proj), "--store", str(store), "--no-progress"]
    for _ in range(3):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
    assert "0 normalized" in res.output and "1 skipped" in res.output
    assert set(done_rows(store / "index.jsonl")) == {"local::proj::a.mp4"}
    assert len([d for d in os.listdir(store / "normalized") if not d.startswith(".")]) == 1


def test_the_store_alone_is_nothing_to_normalize(tmp_path: Path) -> None:
    make_test_video(tmp_path / "src" / "a.mp4", 4, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    assert CliRunner().invoke(main, ["videos", "normalize", str(tmp_path / "src"), "--store", str(store),
                                     "--no-progress"]).exit_code == 0
    res = CliRunner().invoke(main, ["videos", "normalize", str(store), "--store", str(store), "--no-progress"])
    assert res.exit_code != 0 and "no video file" in res.output
