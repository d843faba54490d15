"""``--frames`` given a video store or a folder of raw videos: one line naming the folder and what
it is, exit 2, before anything is read or written. It was taken for a frame cache without frames:
`screen` exited 0, wrote every visual item to failures.jsonl and told to run 'frames extract'."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from screen_helpers import cli

from benchcheck.demo.videos import make_demo_videos, store_and_cache


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    videos = make_demo_videos(root / "videos", n=1)
    (vid,) = store_and_cache(videos, root / "store", root / "frames")
    (root / "nested" / "bench").mkdir(parents=True)
    shutil.copy(videos[0], root / "nested" / "bench" / "clip.mkv")
    (root / "items").mkdir()
    (root / "items" / "b.jsonl").write_text("".join(
        json.dumps({"item_id": f"q{i}", "question": "What is shown?", "options": ["a", "b"], "answer": 0,
                    "video_id": vid}) + "\n" for i in range(3)))
    return root


def _refused(r: subprocess.CompletedProcess[str], expected: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines == [expected], r.stderr


STORE_LINE = ("error: --frames {} is a video store; --frames wants the frame cache made by 'benchcheck frames "
              "extract'; pass it as --store")
VIDEOS_LINE = ("error: --frames {} is a folder of videos ({}); --frames wants the frame cache made by 'benchcheck "
               "frames extract' from a store, which 'benchcheck videos normalize' makes of these videos")


@pytest.mark.parametrize("plan_only", [False, True])
def test_screen_refuses_a_store_or_a_videos_folder_as_frames(project: Path, tmp_path: Path, plan_only: bool) -> None:
    res = tmp_path / "res"
    common = ["--items", str(project / "items"), "--step", "3", "--chain", "3", "--engine", "reference",
              "--no-progress", "--results", str(res), *(["--plan-only"] if plan_only else [])]
    _refused(cli("screen", *common, "--frames", str(project / "store")), STORE_LINE.format(project / "store"))
    _refused(cli("screen", *common, "--frames", str(project / "videos")),
             VIDEOS_LINE.format(project / "videos", "clip_0.mp4"))
    _refused(cli("screen", *common, "--frames", str(project / "nested")),
             VIDEOS_LINE.format(project / "nested", "bench/clip.mkv"))
    assert not res.exists()  # no failure rows, no folder
    ok = cli("screen", *common, "--frames", str(project / "frames"))  # the cache itself still reads
    assert ok.returncode == 0, ok.stderr
    if not plan_only:
        assert not (res / "failures.jsonl").exists()


def test_assemble_and_report_refuse_it_too(project: Path, tmp_path: Path) -> None:
    res = tmp_path / "res"
    r = cli("screen", "--items", str(project / "items"), "--step", "3", "--chain", "3", "--engine", "reference",
            "--no-progress", "--results", str(res), "--frames", str(project / "frames"))
    assert r.returncode == 0, r.stderr
    _refused(cli("assemble", "--items", str(project / "items"), "--results", str(res), "--chain", "3",
                 "--frames", str(project / "store")), STORE_LINE.format(project / "store"))
    _refused(cli("report", "--items", str(project / "items"), "--results", str(res), "--chain", "3", "--no-plots",
                 "--frames", str(project / "videos"), "--out", str(tmp_path / "report")),
             VIDEOS_LINE.format(project / "videos", "clip_0.mp4"))
    assert not (tmp_path / "report").exists()


def test_an_empty_folder_is_still_a_frame_cache_to_be(project: Path, tmp_path: Path) -> None:
    """A cache nothing was extracted into yet: the items have no frames (the hint to extract stands)."""
    empty = tmp_path / "frames"
    empty.mkdir()
    r = cli("screen", "--items", str(project / "items"), "--step", "3", "--chain", "3", "--engine", "reference",
            "--no-progress", "--results", str(tmp_path / "res"), "--frames", str(empty))
    assert "frames extract" in r.stdout + r.stderr and "is a" not in r.stderr
