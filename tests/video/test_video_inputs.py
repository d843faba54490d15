"""Sources as public releases ship them: a timestamp-less VP9 webm, and failures inside workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import failing_work
import pytest
from video_helpers import make_pts0_webm

from benchcheck.video.decode import decode_frames
from benchcheck.video.meta import read_meta, video_path
from benchcheck.video.normalize import NormalizeError, frame_times
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video, read_frame_index


def _painted(store: Path, vid: str) -> list[int]:
    n = read_meta(store, vid).n_frames
    return [read_frame_index(a) for _, a in sorted(
        decode_frames(video_path(store, vid), list(range(n)), lambda f: f.to_ndarray(format="rgb24")).items())]


def _good(folder: Path, n: int) -> list[Path]:
    return [make_test_video(folder / f"good{i}.mp4", n_frames=8 + i, fps=2.0, width=64, height=36) for i in range(n)]


def test_timestampless_vp9_is_timed_by_its_frame_rate(tmp_path: Path) -> None:
    src = make_pts0_webm(tmp_path / "nots.webm")
    report = normalize_videos([src], tmp_path / "store")
    [o] = report.outcomes
    assert o.status == "done", o.reason
    meta = read_meta(tmp_path / "store", str(o.content_hash))
    assert meta.duration == 3.0 and meta.n_frames == 6 and meta.timestamps == [0.5 * j for j in range(6)]
    assert meta.source["retimed"] is True and meta.source["fps"] == 10.0
    assert _painted(tmp_path / "store", str(o.content_hash)) == [5 * j for j in range(6)]  # 10 fps -> 2 fps


def test_frame_times_without_timestamps() -> None:
    assert frame_times([0.0, 0.5, 1.0], None, None) == ([0.0, 0.5, 1.0], False)
    assert frame_times([0.0] * 4, 2.0, None) == ([0.0, 0.5, 1.0, 1.5], True)
    assert frame_times([0.0] * 4, None, 8.0) == ([0.0, 2.0, 4.0, 6.0], True)
    with pytest.raises(NormalizeError, match=r"no timestamps .* no frame rate or duration"):
        frame_times([0.0] * 4, None, None)
    with pytest.raises(NormalizeError, match="repeated timestamps"):
        frame_times([0.0, 0.0, 1.0], 2.0, None)


def test_a_folder_with_a_timestampless_file_stores_every_good_video(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    good = _good(src, 3)
    make_pts0_webm(src / "nots.webm")
    (src / "broken.webm").write_bytes(make_pts0_webm(tmp_path / "whole.webm").read_bytes()[:200])
    out = subprocess.run([sys.executable, "-c", "from benchcheck.cli import main; main()", "videos", "normalize",
                          str(src), "--store", str(tmp_path / "store"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)  # the default worker mode
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 1 and out.stderr.count("failed: ") == 1 and "broken.webm" in out.stderr
    report = normalize_videos([src], tmp_path / "store")
    assert sorted(o.path for o in report.outcomes if o.status == "skipped") == sorted(
        [*map(str, good), str(src / "nots.webm")])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_source_that_raises_inside_the_worker_stops_no_other(tmp_path: Path, workers: int) -> None:
    src = tmp_path / "src"
    src.mkdir()
    good = _good(src, 4)
    for bad in ("boom1.mp4", "boom2.mp4") + (("die1.mp4",) if workers > 1 else ()):
        (src / bad).write_bytes((src / "good0.mp4").read_bytes())
    report = normalize_videos([src], tmp_path / "store", workers=workers, work=failing_work.work)
    by = {Path(o.path).name: o for o in report.outcomes}
    assert len(by) == len(report.outcomes) == len(good) + (3 if workers > 1 else 2)  # one outcome each
    assert {n for n, o in by.items() if o.status in ("done", "exists")} == {p.name for p in good}
    assert by["boom1.mp4"].status == "failed" and "injected failure on boom1.mp4" in str(by["boom1.mp4"].reason)
    if workers > 1:
        assert by["die1.mp4"].status == "failed" and "worker process died" in str(by["die1.mp4"].reason)
