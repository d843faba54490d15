"""Extraction from the normalized store: the right frames, sizes, the cache, memory = cache bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchcheck.video.batch import extract_many
from benchcheck.video.cache import (
    frames_present,
    load_cached_frame,
    load_cached_jpegs,
    load_cached_positions,
    read_frames_json,
    write_frames,
)
from benchcheck.video.extract import extract_jpegs, extract_to_cache
from benchcheck.video.meta import read_meta
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import read_frame_index


def test_v32_grid_frames_and_frames_json(store: Path, ids: dict[str, str], tmp_path: Path) -> None:
    vid = ids["grid2fps.mp4"]  # 64 frames at 2 fps: stored frame i paints i
    res = extract_jpegs(store, vid, "v32")
    expected = uniform_grid([i * 0.5 for i in range(64)], 32)
    assert res.indices == expected
    assert [read_frame_index(j) for j in res.jpegs] == expected
    assert res.sizes == [(320, 180)] * 32
    assert res.timestamps == [i * 0.5 for i in expected]
    extract_to_cache(store, vid, "v32", tmp_path)
    fj = read_frames_json(tmp_path, vid)
    assert fj["plan"] == "v32" and fj["long_side"] == 448 and fj["jpeg_quality"] == 85
    assert fj["n_stored"] == 64 and fj["positions"] == list(range(32)) and fj["indices"] == expected
    assert fj["files"] == [f"frame_{k}.jpg" for k in range(32)] and fj["sizes"] == [[320, 180]] * 32
    assert fj["video_id"] == vid


def test_memory_frames_equal_cached_bytes(store: Path, ids: dict[str, str], tmp_path: Path) -> None:
    vid = ids["cfr10.mp4"]
    for plan in ("v32", "v_fps1_s224", "v_32_s168"):
        out = tmp_path / plan
        assert extract_to_cache(store, vid, plan, out).status == "done"
        assert load_cached_jpegs(out, vid) == extract_jpegs(store, vid, plan).jpegs


def test_middle_frame_is_position_16(store: Path, ids: dict[str, str], tmp_path: Path) -> None:
    vid = ids["cfr10.mp4"]
    extract_to_cache(store, vid, "v32", tmp_path)
    mid = extract_jpegs(store, vid, "mid")
    assert mid.plan.positions == (16,)
    assert load_cached_frame(tmp_path, vid, 16) == mid.jpegs[0] == load_cached_jpegs(tmp_path, vid)[16]
    assert extract_to_cache(store, vid, "mid", tmp_path).status == "cached"  # the v32 cache serves mid


def test_resized_plans_keep_the_aspect_ratio(store: Path, ids: dict[str, str]) -> None:
    assert extract_jpegs(store, ids["cfr10.mp4"], "v_32_s168").sizes[0] == (299, 168)
    assert extract_jpegs(store, ids["portrait.mp4"], "v_8_s168").sizes[0] == (168, 299)
    assert extract_jpegs(store, ids["big43.mp4"], "v32").sizes[0] == (448, 336)
    assert extract_jpegs(store, ids["big43.mp4"], "v_1").sizes[0] == (960, 720)
    rot = extract_jpegs(store, ids["rot90.mp4"], "v_1")
    assert rot.sizes[0] == (180, 320)


def test_short_video_grid_repeats_frames(store: Path, ids: dict[str, str]) -> None:
    res = extract_jpegs(store, ids["short.mp4"], "v32")  # 12 stored frames
    assert len(res.jpegs) == 32 and res.indices == sorted(res.indices) and set(res.indices) == set(range(12))
    assert [read_frame_index(j) for j in res.jpegs] == res.indices
    assert read_meta(store, ids["short.mp4"]).too_short


def test_fps_plan_on_a_1024_frame_video(store: Path, ids: dict[str, str]) -> None:
    vid = ids["long.mp4"]  # 1024 stored frames over 550 s, 64x36
    res = extract_jpegs(store, vid, "fps2_s224", max_images=300)
    assert res.capped_ctx is True and res.n_max == 300 and res.n_grid is not None and res.n_grid > 1000
    assert res.n_frames_used == len(res.jpegs) <= 300
    stored = [read_frame_index(j) for j in res.jpegs]
    assert stored == sorted(stored) and len(set(stored)) == len(stored)
    free = extract_jpegs(store, vid, "fps0.25_s224")
    assert free.capped_ctx is False and free.n_frames_used == free.n_grid


def test_unknown_video_and_plan_errors(store: Path) -> None:
    with pytest.raises(ValueError, match=r"meta\.json"):
        extract_jpegs(store, "0" * 32, "v32")
    with pytest.raises(ValueError, match="unknown frame plan"):
        extract_jpegs(store, "0" * 32, "v31x")
    with pytest.raises(ValueError):
        extract_jpegs(store, "../escape", "v32")


def test_extract_many_resumes_and_lists_failures(store: Path, ids: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "frames"
    wanted = [ids["cfr10.mp4"], ids["vfr.mp4"], "f" * 32]
    first = extract_many(store, wanted, "v32", out)
    assert first.count("done") == 2 and [v for v, _ in first.failures] == ["f" * 32]
    assert all(frames_present(out, v) for v in wanted[:2])
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.jpg")}
    again = extract_many(store, wanted, "v32", out)
    assert again.count("cached") == 2 and again.count("done") == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.jpg")} == before
    rows = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert rows[0]["video_id"] == "f" * 32 and "not in the store" in rows[0]["reason"]
    assert len(rows) == 1  # the rerun failed it the same way: no second row (each rerun added one)
    assert again.failures == first.failures  # ... while the run still reports it (exit 1)
    other = extract_many(store, wanted[:1], "v_fps1_s224", out)
    assert "holds plan 'v32'" in other.failures[0][1]


def test_partial_cache_folder_is_replaced(store: Path, ids: dict[str, str], tmp_path: Path) -> None:
    vid = ids["cfr10.mp4"]
    folder = tmp_path / vid
    folder.mkdir()
    (folder / "frame_0.jpg").write_bytes(b"torn")  # a killed writer of some older tool
    (tmp_path / f".tmp-{vid}-999999999-dead").mkdir()
    report = extract_many(store, [vid], "v32", tmp_path)
    assert report.count("done") == 1
    assert load_cached_jpegs(tmp_path, vid) == extract_jpegs(store, vid, "v32").jpegs
    assert not list(tmp_path.glob(".tmp-*"))


def test_origin_cache_without_files_list_reads_in_position_order(tmp_path: Path) -> None:
    folder = tmp_path / "vid1"
    folder.mkdir()
    for k in (0, 2, 10, 1):
        (folder / f"frame_{k}.jpg").write_bytes(bytes([k]))
    (folder / "frames.json").write_text(json.dumps({"video_id": "vid1", "n_frames": 4}))
    assert load_cached_jpegs(tmp_path, "vid1") == [b"\x00", b"\x01", b"\x02", b"\x0a"]
    write_frames(tmp_path, "vid2", {"positions": [3], "files": ["frame_3.jpg"]}, [b"x"])
    assert load_cached_frame(tmp_path, "vid2", 3) == b"x"
    with pytest.raises(FileNotFoundError):
        load_cached_frame(tmp_path, "vid2", 16)


def test_positions_read_in_the_order_asked(tmp_path: Path) -> None:
    """Several positions at once (``frames.json`` read once) equal each read alone, in the order
    asked; a missing one names the folder and the position."""
    write_frames(tmp_path, "v", {"positions": [0, 1, 2], "files": ["a.jpg", "b.jpg", "c.jpg"]}, [b"0", b"1", b"2"])
    assert load_cached_positions(tmp_path, "v", [2, 0, 2]) == [b"2", b"0", b"2"]
    assert load_cached_positions(tmp_path, "v", range(3)) == [load_cached_frame(tmp_path, "v", k) for k in range(3)]
    with pytest.raises(FileNotFoundError, match=r"v: no frame at position 7"):
        load_cached_positions(tmp_path, "v", [0, 7])


def test_damaged_store_video_is_a_failure_not_a_crash(store: Path, ids: dict[str, str], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "store"
    vid = ids["cfr10.mp4"]
    shutil.copytree(store / "normalized" / vid, copy / "normalized" / vid)
    data = (copy / "normalized" / vid / "video.mp4").read_bytes()
    (copy / "normalized" / vid / "video.mp4").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=r"video\.mp4"):
        extract_jpegs(copy, vid, "v32")
    report = extract_many(copy, [vid], "v32", tmp_path / "frames")
    assert report.count("done") == 0 and report.failures[0][0] == vid
    assert not frames_present(tmp_path / "frames", vid)
