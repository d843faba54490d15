"""A stored video whose ``meta.json`` lists fewer timestamps than frames was used without a word:
the plans took the timestamps as the whole video, so every grid left its last frames out. It is
now that video's one-line failure, naming its folder and both counts, and the other videos go on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.meta import META_FILE, read_meta, video_dir
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video


def test_fewer_timestamps_than_frames_fails_that_video_only(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    make_test_video(raw / "a.mp4", 40, fps=2.0, width=64, height=36)
    make_test_video(raw / "b.mp4", 48, fps=2.0, width=64, height=36, seed=1)
    store = tmp_path / "store"
    report = normalize_videos([raw], store)
    bad, good = (str(o.content_hash) for o in sorted(report.outcomes, key=lambda o: o.path))
    meta_path = video_dir(store, bad) / META_FILE
    meta = json.loads(meta_path.read_text())
    assert meta["n_frames"] == len(meta["timestamps"]) == 40
    meta["timestamps"] = meta["timestamps"][:30]
    meta_path.write_text(json.dumps(meta))

    with pytest.raises(ValueError, match=r"meta\.json: meta\.json lists 30 timestamps for its 40 frames$"):
        read_meta(store, bad)
    assert read_meta(store, good).n_frames == 48

    out = tmp_path / "frames"
    res = CliRunner().invoke(main, ["frames", "extract", "--store", str(store), "--plan", "v32", "--out", str(out),
                                    "--no-progress"])
    assert res.exit_code == 1, res.output
    [line] = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert line == f"failed: {bad}: {meta_path}: meta.json lists 30 timestamps for its 40 frames"
    assert "1 videos extracted" in res.output and "1 failed" in res.output
    assert (out / good / "frames.json").is_file() and not (out / bad).exists()
