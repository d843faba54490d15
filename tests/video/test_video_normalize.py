"""Normalizing real mp4 files: rates, sizes, rotation, limits, broken inputs, idempotence, crashes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from video_helpers import VFR_TIMES

from benchcheck.store import read_rows
from benchcheck.video.decode import decode_frames
from benchcheck.video.index import read_index
from benchcheck.video.meta import normalized_ids, read_meta, video_path
from benchcheck.video.normalize import output_size, output_slots
from benchcheck.video.plans import nearest_index
from benchcheck.video.store import NormalizeReport, normalize_videos
from benchcheck.video.synth import make_test_video, read_frame_code, read_frame_index


def _painted(store: Path, vid: str) -> list[int]:
    n = read_meta(store, vid).n_frames
    return [read_frame_index(a) for _, a in sorted(
        decode_frames(video_path(store, vid), list(range(n)), lambda f: f.to_ndarray(format="rgb24")).items())]


def test_constant_rate_source_is_stored_at_2fps(store: Path, ids: dict[str, str]) -> None:
    meta = read_meta(store, ids["cfr10.mp4"])  # 200 frames at 10 fps = 20 s
    assert (meta.n_frames, meta.fps, meta.duration) == (40, 2.0, 20.0)
    assert meta.timestamps == [i * 0.5 for i in range(40)]
    assert not meta.too_short and (meta.width, meta.height) == (320, 180)
    assert _painted(store, ids["cfr10.mp4"]) == [5 * i for i in range(40)]
    assert meta.source["sha256"].startswith(ids["cfr10.mp4"]) and meta.source["size"] > 0
    assert meta.source["path"].endswith("cfr10.mp4") and meta.normalizer["gop"] == 32


def test_variable_rate_source_takes_the_nearest_frame(store: Path, ids: dict[str, str]) -> None:
    meta = read_meta(store, ids["vfr.mp4"])
    _, slots = output_slots(meta.duration)
    assert meta.n_frames == len(slots) == 11
    assert _painted(store, ids["vfr.mp4"]) == [nearest_index(VFR_TIMES, t) for t in slots]


def test_long_video_is_capped_at_1024_frames(store: Path, ids: dict[str, str]) -> None:
    meta = read_meta(store, ids["long.mp4"])  # 1100 frames at 2 fps = 550 s
    assert meta.n_frames == 1024 and meta.fps == pytest.approx(1024 / 550)
    painted = _painted(store, ids["long.mp4"])
    assert painted[0] == 0 and painted[-1] >= 1097 and painted == sorted(painted)
    assert painted[512] == nearest_index([i * 0.5 for i in range(1100)], 512 * 550 / 1024)


def test_short_video_is_flagged(store: Path, ids: dict[str, str]) -> None:
    meta = read_meta(store, ids["short.mp4"])
    assert meta.n_frames == 12 and meta.too_short


def test_rotation_metadata_is_applied(store: Path, ids: dict[str, str]) -> None:
    meta = read_meta(store, ids["rot90.mp4"])
    assert (meta.width, meta.height) == (180, 320) and meta.source["rotation"] == 90
    frames = decode_frames(video_path(store, ids["rot90.mp4"]), [3],
                           lambda f: (f.rotation, f.to_ndarray(format="rgb24")))
    rotation, rgb = frames[3]
    assert rotation == 0  # the stored pixels are upright: no display matrix left
    assert read_frame_code(rgb) == (3, 1)  # the pattern painted upright in the source, turned for display


def test_portrait_and_4_3_sizes(store: Path, ids: dict[str, str]) -> None:
    assert (read_meta(store, ids["portrait.mp4"]).width, read_meta(store, ids["portrait.mp4"]).height) == (180, 320)
    big = read_meta(store, ids["big43.mp4"])  # 1440x1080 -> short side 720
    assert (big.width, big.height) == (960, 720)
    assert _painted(store, ids["big43.mp4"]) == [0, 1, 2, 3]


def test_output_size_rules() -> None:
    assert output_size(1920, 1080, 60) == (1280, 720)
    assert output_size(1920, 1080, 31 * 60) == (854, 480)
    assert output_size(1080, 1920, 60) == (720, 1280)
    assert output_size(320, 180, 60) == (320, 180)  # never upscaled
    assert output_size(321, 181, 60) == (322, 182)  # even sides for H.264 4:2:0


def test_broken_inputs_are_listed_and_the_rest_stored(normalized: tuple[Path, NormalizeReport]) -> None:
    store, report = normalized
    reasons = {Path(f.path).name: f.reason or "" for f in report.failures}
    assert set(reasons) == {"truncated.mp4", "truncated_faststart.mp4", "empty.mp4", "notvideo.mp4"}
    assert reasons["empty.mp4"] == "empty file (0 bytes)"
    assert reasons["notvideo.mp4"].startswith("not a readable video")
    assert reasons["truncated.mp4"].startswith("not a readable video")
    assert reasons["truncated_faststart.mp4"].startswith("truncated: frames end at")
    rows = list(read_rows(store / "failures.jsonl"))
    assert {Path(r["source"]).name for r in rows} == set(reasons)
    assert all(r["reason"] and r["key"].startswith("local::") for r in rows)
    assert not list((store / "normalized").glob(".tmp-*"))


def test_index_maps_local_keys_to_stored_videos(normalized: tuple[Path, NormalizeReport]) -> None:
    store, report = normalized
    index = read_index(store / "index.jsonl")
    folder = Path(report.outcomes[0].path).parent.name
    assert index[f"local::{folder}::cfr10.mp4"] == next(
        o.content_hash for o in report.outcomes if o.path.endswith("/cfr10.mp4"))
    assert sorted(set(index.values())) == normalized_ids(store)


def test_second_run_does_nothing(normalized: tuple[Path, NormalizeReport], sources: Path) -> None:
    store, first = normalized
    before = {p.name: p.read_bytes() for p in store.iterdir() if p.is_file()}
    again = normalize_videos([sources], store)
    assert again.count("skipped") == first.count("done") and again.count("done") == 0
    assert again.count("failed") == first.count("failed")
    after = {p.name: p.read_bytes() for p in store.iterdir() if p.is_file()}
    assert after == before  # no index row added, no failure repeated


def test_read_index_reads_the_origin_manifest_format(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join([
        json.dumps({"key": "org/ds::a.zip::v1.mp4", "status": "done", "content_hash": "h1"}),
        json.dumps({"key": "org/ds::a.zip::v2.mp4", "status": "failed", "error": "x"}),
        json.dumps({"key": "org/ds::a.zip::v1.mp4", "status": "done", "content_hash": "h1b"}),
        json.dumps({"key": "org/ds::a.zip::v1.mp4", "status": "failed", "content_hash": "zzz"}),
        json.dumps({"key": "no-separator", "status": "done", "content_hash": "h3"}),
        '{"key": "org/ds::a.zip::v4.mp4", "status": "do',
    ]))
    assert read_index(manifest) == {"org/ds::a.zip::v1.mp4": "h1b"}


def test_same_content_under_two_keys_is_stored_once(tmp_path: Path) -> None:
    a = make_test_video(tmp_path / "a" / "clip.mp4", 6, width=64, height=36)
    b = tmp_path / "b" / "copy.mp4"
    b.parent.mkdir()
    shutil.copy(a, b)
    report = normalize_videos([a, b], tmp_path / "store", keys=["hub/repo::x.zip::clip.mp4", None])  # type: ignore[list-item]
    index = read_index(tmp_path / "store" / "index.jsonl")
    assert index["hub/repo::x.zip::clip.mp4"] == index["local::b::copy.mp4"]
    assert sorted(o.status for o in report.outcomes) == ["done", "exists"]
    assert len(normalized_ids(tmp_path / "store")) == 1


def test_a_stored_video_without_its_index_row_is_recovered(tmp_path: Path) -> None:
    src = make_test_video(tmp_path / "src" / "v.mp4", 6, width=64, height=36)
    store = tmp_path / "store"
    normalize_videos([src], store)
    (store / "index.jsonl").unlink()  # killed after the rename, before the row
    stale = store / "normalized" / ".tmp-abc-999999999-dead"
    stale.mkdir()
    report = normalize_videos([src], store)
    assert [o.status for o in report.outcomes] == ["exists"]
    assert read_index(store / "index.jsonl") == {"local::src::v.mp4": report.outcomes[0].content_hash}
    assert not stale.exists()


def test_killed_run_resumes_to_the_same_store(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for i in range(6):
        make_test_video(src / f"v{i}.mp4", 300, fps=30.0, width=320, height=180, textured=True, seed=i)
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "benchcheck", "videos", "normalize", str(src), "--store", str(store), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not read_index(store / "index.jsonl"):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = read_index(store / "index.jsonl")
    assert 1 <= len(first) < 6
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done_rows = [r for r in read_rows(store / "index.jsonl") if r.get("status") == "done"]
    assert len(done_rows) == len({r["key"] for r in done_rows}) == 6  # nothing lost or duplicated
    clean = normalize_videos([src], tmp_path / "clean")
    assert read_index(store / "index.jsonl") == read_index(tmp_path / "clean" / "index.jsonl")
    assert not list((store / "normalized").glob(".tmp-*"))
    for o in clean.outcomes:
        assert o.content_hash
        assert read_meta(store, o.content_hash).timestamps == read_meta(tmp_path / "clean", o.content_hash).timestamps


def test_other_containers_and_codecs(tmp_path: Path) -> None:
    import av

    from benchcheck.video.synth import paint_frame

    (tmp_path / "src").mkdir()
    for name, codec in (("clip.avi", "mpeg4"), ("clip.mkv", "libx264")):
        with av.open(str(tmp_path / "src" / name), "w") as out:
            stream = out.add_stream(codec, rate=10)
            stream.width, stream.height, stream.pix_fmt = 128, 72, "yuv420p"
            for i in range(30):
                frame = av.VideoFrame.from_ndarray(paint_frame(i, 128, 72), format="rgb24")
                frame.pts = i
                for packet in stream.encode(frame):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
    report = normalize_videos([tmp_path / "src"], tmp_path / "store")
    assert sorted(o.status for o in report.outcomes) == ["done", "done"]
    for o in report.outcomes:
        assert o.content_hash
        assert _painted(tmp_path / "store", o.content_hash) == [0, 5, 10, 15, 20, 25]
