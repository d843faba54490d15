"""make-shards: origin-compatible manifest, whole video folders per shard, deterministic shards."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from data_helpers import make_frame_cache, make_video_store

from benchcheck.data.manifest import ManifestError, load_manifest, parse_manifest
from benchcheck.data.shards import make_shards, parse_size, plan_shards, scan_source


def test_parse_size() -> None:
    assert parse_size("2GB") == 2 * 10**9
    assert parse_size("512MiB") == 512 * 2**20
    assert parse_size("1.5k") == 1500
    assert parse_size("4096") == 4096
    for bad in ("", "two GB", "-1GB", "3XB", "0"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_frame_shards_follow_the_origin_format(frame_cache: Path, tmp_path: Path) -> None:
    res = make_shards(frame_cache, tmp_path / "pkg", shard_bytes=12_000)
    m = json.loads((tmp_path / "pkg" / "frames_manifest.json").read_text())
    # The origin's reader (seed 000, section 3) works unchanged on our manifest.
    for s in m["shards"]:
        h = hashlib.sha256(open(tmp_path / "pkg" / s["file"], "rb").read()).hexdigest()  # noqa: SIM115
        assert h == s["sha256"]
    assert m["n_videos"] == 7 and m["kind"] == "frames"
    assert len(res.manifest.shards) > 1
    seen: list[str] = []
    for s in res.manifest.shards:
        assert s.file.startswith("frames_") and s.file.endswith(".tar")
        with tarfile.open(tmp_path / "pkg" / s.file) as tf:
            names = tf.getnames()
        vids = sorted({n.split("/")[0] for n in names})
        assert len(vids) == s.n_videos
        assert all(f"{v}/frames.json" in names and f"{v}/frame_0.jpg" in names for v in vids)
        seen += vids
        assert s.size == (tmp_path / "pkg" / s.file).stat().st_size
        assert s.size <= 12_000 or s.n_videos == 1
    assert seen == sorted(p.name for p in frame_cache.iterdir())  # every video once, in order


def test_system_tar_extracts_a_shard_like_the_seed(frame_cache: Path, tmp_path: Path) -> None:
    res = make_shards(frame_cache, tmp_path / "pkg", shard_bytes=10**9)
    dest = tmp_path / "frames" / "pool_frames"
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-xf", str(tmp_path / "pkg" / res.manifest.shards[0].file), "-C", str(dest)], check=True)
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in frame_cache.iterdir())
    v = next(dest.iterdir())
    assert (v / "frame_1.jpg").read_bytes() == (frame_cache / v.name / "frame_1.jpg").read_bytes()


def test_rebuild_is_byte_identical(frame_cache: Path, tmp_path: Path) -> None:
    a = make_shards(frame_cache, tmp_path / "a", shard_bytes=12_000).manifest
    b = make_shards(frame_cache, tmp_path / "b", shard_bytes=12_000).manifest
    assert a == b


def test_video_store_and_incomplete_folders(tmp_path: Path) -> None:
    store = make_video_store(tmp_path / "normalized", 3)
    (store / "deadbeefdeadbeef").mkdir()  # a folder without meta.json: not packed, reported
    (store / "deadbeefdeadbeef" / "video.mp4").write_bytes(b"partial")
    res = make_shards(store, tmp_path / "pkg", shard_bytes=parse_size("2GB"))
    assert res.manifest.kind == "videos" and res.manifest.n_videos == 3
    assert [s.file for s in res.manifest.shards] == ["videos_000.tar"]
    assert any("deadbeefdeadbeef" in p and "meta.json" in p for p in res.problems)
    with tarfile.open(tmp_path / "pkg" / "videos_000.tar") as tf:
        assert sum(n.endswith("/video.mp4") for n in tf.getnames()) == 3


def test_oversized_folder_gets_its_own_shard(tmp_path: Path) -> None:
    src = make_frame_cache(tmp_path / "pf", 3)
    videos = scan_source(src, "frames").videos
    plan = plan_shards(videos, shard_bytes=100)  # smaller than any folder
    assert [len(g) for g in plan] == [1, 1, 1]


def test_bad_manifests_are_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="shards"):
        parse_manifest({"n_videos": 3}, "m.json")
    with pytest.raises(ManifestError, match="safe relative path"):
        parse_manifest({"shards": [{"file": "../x.tar", "sha256": "0" * 64}]}, "m.json")
    with pytest.raises(ManifestError, match="64 hex"):
        parse_manifest({"shards": [{"file": "x.tar", "sha256": "abc"}]}, "m.json")
    with pytest.raises(ManifestError, match="twice"):
        parse_manifest({"shards": [{"file": "x.tar", "sha256": "0" * 64}] * 2}, "m.json")
    (tmp_path / "m.json").write_text("{not json")
    with pytest.raises(ManifestError, match=r"m\.json"):
        load_manifest(tmp_path / "m.json")
    origin = parse_manifest({"shards": [{"file": "frames_000.tar", "sha256": "A" * 64}], "n_videos": 1}, "o")
    assert origin.kind is None and origin.shards[0].sha256 == "a" * 64
