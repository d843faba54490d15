"""data verify on what is on disk: per-shard verdicts and the video count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchcheck.data.manifest import ManifestError
from benchcheck.data.safe_tar import safe_extract
from benchcheck.data.shards import make_shards
from benchcheck.data.verify import find_targets, verify_manifest

BENCHCHECK = str(Path(sys.executable).with_name("benchcheck"))


def test_seed_style_folder_with_target(frame_cache: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "frames_tar"
    res = make_shards(frame_cache, pkg, shard_bytes=12_000)
    target = tmp_path / "frames" / "pool_frames"
    for s in res.manifest.shards[:-1]:  # extracted by hand, as the seed does, except the last
        safe_extract(pkg / s.file, target)
    (pkg / res.manifest.shards[0].file).write_bytes(b"truncated")
    (t,) = find_targets(pkg, target)
    rep = verify_manifest(t.manifest, t.kind, t.target, t.out)
    status = [v.status for v in rep.verdicts]
    assert status[0] == "mismatch" and set(status[1:]) == {"ok"}
    assert rep.verdicts[-1].detail == "not extracted yet"  # no fetch log: extraction state is unknown
    assert rep.count is not None and rep.count.found == 7 - (res.manifest.shards[-1].n_videos or 0)
    assert rep.count.expected == 7 and not rep.good


def test_incomplete_video_folder_is_flagged(frame_cache: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "frames_tar"
    res = make_shards(frame_cache, pkg, shard_bytes=10**9)
    target = tmp_path / "pf"
    safe_extract(pkg / res.manifest.shards[0].file, target)
    victim = sorted(target.iterdir())[2]
    (victim / "frames.json").unlink()
    rep = verify_manifest(pkg / "frames_manifest.json", "frames", target, None)
    assert rep.count is not None and rep.count.incomplete == (victim.name,) and not rep.good
    assert victim.name in rep.count.line()


def test_no_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no fetch record"):
        find_targets(tmp_path)
    r = subprocess.run([BENCHCHECK, "data", "verify", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1


def test_make_shards_cli(frame_cache: Path, tmp_path: Path) -> None:
    r = subprocess.run([BENCHCHECK, "data", "make-shards", str(frame_cache), "--out", str(tmp_path / "o"),
                        "--shard-size", "12kB"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "frames_manifest.json" in r.stdout and "n_videos 7" in r.stdout
    r = subprocess.run([BENCHCHECK, "data", "make-shards", str(frame_cache), "--out", str(tmp_path / "o"),
                        "--shard-size", "lots"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--shard-size" in r.stderr


def test_a_shard_not_extracted_yet_lists_the_members_extraction_would_refuse(tmp_path: Path) -> None:
    """A downloaded shard with unsafe members is not "OK (not extracted yet)": verify names them."""
    import io
    import json
    import tarfile

    from benchcheck.data.manifest import sha256_file

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    shard = pkg / "frames_000.tar"
    with tarfile.open(shard, "w", format=tarfile.GNU_FORMAT) as tf:
        for name, kind, link in (("vid1/frame_0.jpg", tarfile.REGTYPE, ""), ("../escape.txt", tarfile.REGTYPE, ""),
                                 ("vid1/etc", tarfile.SYMTYPE, "/etc")):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = kind, link
            ti.size = 4 if kind == tarfile.REGTYPE else 0
            tf.addfile(ti, io.BytesIO(b"data") if kind == tarfile.REGTYPE else None)
    (pkg / "frames_manifest.json").write_text(json.dumps(
        {"shards": [{"file": shard.name, "sha256": sha256_file(shard)}], "n_videos": 1}))
    rep = verify_manifest(pkg / "frames_manifest.json", "frames", None, None)
    (v,) = rep.verdicts
    assert v.status == "refused" and not rep.good
    assert "not extracted yet; extraction would refuse 2 members" in v.detail
    assert "'../escape.txt'" in v.detail and "'vid1/etc'" in v.detail and "symbolic link" in v.detail
    r = subprocess.run([BENCHCHECK, "data", "verify", str(pkg)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "REFUSED MEMBERS" in r.stdout + r.stderr and "escape.txt" in r.stdout + r.stderr


@pytest.mark.parametrize("text", ["{not json", "[1]", '{"repo": "lab/x"}', '{"target": 5, "manifest": ["x"]}'])
def test_an_unreadable_fetch_record_is_named_not_called_missing(tmp_path: Path, text: str) -> None:
    """A fetch record that exists but cannot be read was reported as `no fetch record`: the user
    looked for a file that is there, with no word of what is wrong with it."""
    record = tmp_path / ".benchcheck" / "fetch_frames.json"
    record.parent.mkdir()
    record.write_text(text)
    r = subprocess.run([BENCHCHECK, "data", "verify", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert str(record) in r.stderr and "no fetch record" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_shard_with_many_refused_members_names_the_first_and_counts_the_rest(tmp_path: Path) -> None:
    """Extraction named every refused member in its one line: thousands of them for a whole folder."""
    import io
    import tarfile

    from benchcheck.data.manifest import ShardEntry, sha256_file
    from benchcheck.data.verify import unpack_shard

    shard = tmp_path / "frames_000.tar"
    with tarfile.open(shard, "w", format=tarfile.GNU_FORMAT) as tf:
        for i in range(25):
            ti = tarfile.TarInfo(f"../escape_{i}.txt")
            ti.size = 4
            tf.addfile(ti, io.BytesIO(b"data"))
    target = tmp_path / "frames"
    v = unpack_shard(shard, ShardEntry(shard.name, sha256_file(shard)), target, tmp_path, "frames")
    assert v.status == "refused"
    assert "25 refused members: " in v.detail and "escape_0.txt" in v.detail and "... and 15 more" in v.detail
    assert "escape_24.txt" not in v.detail
    assert not (tmp_path / "escape_0.txt").exists()
