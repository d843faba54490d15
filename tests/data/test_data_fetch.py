"""data fetch against a loopback Hub that speaks what huggingface_hub 1.33 calls."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import huggingface_hub
from data_helpers import FakeHub, make_video_store

from benchcheck.data.fetch import FetchOptions, fetch_items, fetch_shards
from benchcheck.data.layout import read_extracted
from benchcheck.data.shards import make_shards

TESTED_HF_HUB = "1.33.0"


def _publish(hub: FakeHub, src: Path, tmp: Path, repo: str = "lab/frames", size: int = 12_000) -> list[str]:
    pkg = tmp / "pkg"
    res = make_shards(src, pkg, shard_bytes=size)
    hub.add_dir(repo, pkg)
    return [s.file for s in res.manifest.shards]


def _opts(hub: FakeHub, out: Path, **kw: object) -> FetchOptions:
    return FetchOptions("lab/frames", "frames", out, endpoint=hub.url, **kw)  # type: ignore[arg-type]


def test_pinned_client_version() -> None:
    assert huggingface_hub.__version__ == TESTED_HF_HUB


def test_fetch_verifies_extracts_counts_and_rerun_does_nothing(fake_hub: FakeHub, frame_cache: Path,
                                                                tmp_path: Path) -> None:
    shards = _publish(fake_hub, frame_cache, tmp_path)
    out = tmp_path / "pool"
    rep = fetch_shards(_opts(fake_hub, out))
    assert rep.good and [v.status for v in rep.verdicts] == ["ok"] * len(shards)
    assert rep.count is not None and rep.count.found == rep.count.expected == 7
    target = out / "frames" / "pool_frames"
    for v in frame_cache.iterdir():
        for f in v.iterdir():
            assert (target / v.name / f.name).read_bytes() == f.read_bytes()
    n_requests = len(fake_hub.requests)
    rep2 = fetch_shards(_opts(fake_hub, out))
    assert rep2.good and {v.status for v in rep2.verdicts} == {"extracted"}
    tar_gets = [r for r in fake_hub.requests[n_requests:] if "/resolve/" in r.path]
    assert tar_gets == []  # the rerun only asked for the revision and the file list


def test_corrupted_shard_is_reported_and_not_extracted(fake_hub: FakeHub, frame_cache: Path, tmp_path: Path) -> None:
    shards = _publish(fake_hub, frame_cache, tmp_path)
    good = fake_hub.repos["lab/frames"].files[shards[1]]
    bad = bytearray(good)
    bad[700] ^= 0xFF  # one flipped byte inside the first member's data
    fake_hub.add_file("lab/frames", shards[1], bytes(bad))
    out = tmp_path / "pool"
    rep = fetch_shards(_opts(fake_hub, out))
    verdict = {v.file: v for v in rep.verdicts}
    assert verdict[shards[1]].status == "mismatch" and "not extracted" in verdict[shards[1]].detail
    assert all(verdict[s].status == "ok" for s in shards if s != shards[1])
    with tarfile.open(fileobj=io.BytesIO(good)) as tf:
        its_videos = {n.split("/")[0] for n in tf.getnames()}
    target = out / "frames" / "pool_frames"
    assert not any((target / v).exists() for v in its_videos)
    assert not (out / "frames_tar" / shards[1]).exists()  # deleted so a rerun downloads it again
    assert rep.count is not None and not rep.count.good and rep.count.found == 7 - len(its_videos)
    assert not rep.good
    # The publisher fixes the shard: a rerun downloads that one shard only.
    fake_hub.add_file("lab/frames", shards[1], good)
    before = len(fake_hub.requests)
    rep2 = fetch_shards(_opts(fake_hub, out))
    assert rep2.good and rep2.count is not None and rep2.count.found == 7
    got = {r.path.rsplit("/", 1)[1] for r in fake_hub.requests[before:] if r.method == "GET" and "/resolve/" in r.path}
    assert got == {shards[1]}


def test_truncated_download_is_resumed_with_a_range_request(fake_hub: FakeHub, frame_cache: Path,
                                                            tmp_path: Path) -> None:
    # huggingface_hub resumes from what it has written, in 10 MiB chunks: a shard of a little
    # more than that, cut after the first chunk, must continue with "Range: bytes=10485760-".
    big = frame_cache / sorted(p.name for p in frame_cache.iterdir())[0] / "frame_big.jpg"
    big.write_bytes(os.urandom(11 * 2**20))
    shards = _publish(fake_hub, frame_cache, tmp_path, size=10**9)
    chunk = 10 * 2**20
    fake_hub.drop_after[shards[0]] = chunk + 4096
    out = tmp_path / "pool"
    rep = fetch_shards(_opts(fake_hub, out))
    assert rep.good, [v.line() for v in rep.verdicts]
    ranges = [r.range for r in fake_hub.gets(shards[0])]
    assert ranges == [None, f"bytes={chunk}-"]
    assert (out / "frames" / "pool_frames" / big.parent.name / big.name).read_bytes() == big.read_bytes()


def test_partial_file_of_a_killed_fetch_is_not_resumed_by_the_client_and_is_removed(
        fake_hub: FakeHub, frame_cache: Path, tmp_path: Path) -> None:
    # huggingface_hub 1.33 downloads into a process-unique "<hash>.<etag>.<uuid8>.incomplete"
    # opened with "wb" (file_download._download_to_tmp_and_move, huggingface_hub PR 4228): it
    # resumes only within one process, never from a file a killed process left, even one with
    # the stable "<hash>.<etag>.incomplete" name. Such files are dead weight (a shard's size
    # each), so a fetch removes them; if a later client resumes across processes, this fails.
    from huggingface_hub._local_folder import get_local_download_paths

    shards = _publish(fake_hub, frame_cache, tmp_path, size=10**9)
    data = fake_hub.repos["lab/frames"].files[shards[0]]
    local_dir = tmp_path / "pool" / "frames_tar"
    incomplete = get_local_download_paths(local_dir, shards[0]).incomplete_path(hashlib.sha256(data).hexdigest())
    stable = incomplete
    unique = incomplete.with_name(f"{incomplete.stem}.0123abcd.incomplete")
    for p in (stable, unique):
        p.write_bytes(data[: len(data) // 2])  # what a SIGKILL mid-download leaves
    rep = fetch_shards(_opts(fake_hub, tmp_path / "pool"))
    assert rep.good, [v.line() for v in rep.verdicts]
    assert [r.range for r in fake_hub.gets(shards[0])] == [None]  # served whole, from byte 0
    assert not stable.exists() and not unique.exists()


def test_manifest_listing_a_missing_shard(fake_hub: FakeHub, frame_cache: Path, tmp_path: Path) -> None:
    shards = _publish(fake_hub, frame_cache, tmp_path)
    del fake_hub.repos["lab/frames"].files[shards[-1]]
    fake_hub.repos["lab/frames"].bump()
    rep = fetch_shards(_opts(fake_hub, tmp_path / "pool"))
    last = next(v for v in rep.verdicts if v.file == shards[-1])
    assert last.status == "missing" and "not in lab/frames" in last.detail
    assert all(v.good for v in rep.verdicts if v.file != shards[-1])
    assert rep.count is not None and not rep.count.good


def test_malicious_shard_with_a_matching_hash_writes_nothing_outside(fake_hub: FakeHub, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, kind, link in [("vidA/frames.json", tarfile.REGTYPE, ""), ("../../evil.txt", tarfile.REGTYPE, ""),
                                 ("vidA/etc", tarfile.SYMTYPE, "/etc"), ("/abs.txt", tarfile.REGTYPE, ""),
                                 ("vidA/tty", tarfile.CHRTYPE, "")]:
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = kind, link
            data = b"{}" if kind == tarfile.REGTYPE else b""
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    blob = buf.getvalue()
    fake_hub.add_file("lab/frames", "frames_000.tar", blob)
    fake_hub.add_file("lab/frames", "frames_manifest.json", json.dumps(
        {"shards": [{"file": "frames_000.tar", "sha256": hashlib.sha256(blob).hexdigest()}], "n_videos": 1}).encode())
    out = tmp_path / "deep" / "pool"
    rep = fetch_shards(_opts(fake_hub, out))
    (v,) = rep.verdicts
    assert v.status == "refused"
    for member in ("../../evil.txt", "vidA/etc", "/abs.txt", "vidA/tty"):
        assert repr(member) in v.detail
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "deep" / "evil.txt").exists()
    assert (out / "frames" / "pool_frames" / "vidA" / "frames.json").is_file()
    assert rep.count is not None and rep.count.good  # the one video is there, but the shard is flagged
    assert not rep.good


def test_videos_in_a_subfolder_with_delete_shards(fake_hub: FakeHub, tmp_path: Path) -> None:
    store = make_video_store(tmp_path / "normalized", 3)
    pkg = tmp_path / "pkg"
    make_shards(store, pkg / "videos", shard_bytes=20_000)
    fake_hub.add_dir("lab/fp", pkg)
    fake_hub.add_file("lab/fp", "items/samples/MVBench.jsonl", b'{"item_id": "MVBench_0"}\n')
    out = tmp_path / "fp"
    rep = fetch_shards(FetchOptions("lab/fp", "videos", out, endpoint=fake_hub.url, delete_shards=True, workers=2))
    assert rep.good and rep.count is not None and rep.count.found == 3
    normalized = out / "store" / "normalized"
    for d in store.iterdir():
        assert (normalized / d.name / "video.mp4").read_bytes() == (d / "video.mp4").read_bytes()
    assert list((out / "videos_tar" / "videos").glob("*.tar")) == []
    assert len(read_extracted(out, "videos")) == len(rep.verdicts)
    items = fetch_items(FetchOptions("lab/fp", "items", out, endpoint=fake_hub.url))
    assert items.good and items.files == ["items/samples/MVBench.jsonl", "videos/videos_manifest.json"]
    assert (out / "items" / "samples" / "MVBench.jsonl").is_file()


def test_cli_fetch_and_verify_through_hf_endpoint(fake_hub: FakeHub, frame_cache: Path, tmp_path: Path) -> None:
    shards = _publish(fake_hub, frame_cache, tmp_path)
    env = {**os.environ, "HF_ENDPOINT": fake_hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    out = tmp_path / "pool"
    cmd = [str(Path(sys.executable).with_name("benchcheck"))]
    r = subprocess.run([*cmd, "data", "fetch", "lab/frames", "--kind", "frames", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "videos: 7 found, n_videos 7: OK" in r.stdout
    assert f"{len(shards)}/{len(shards)} shards OK" in r.stdout
    r = subprocess.run([*cmd, "data", "verify", str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and all(f"{s}: OK (extracted)" in r.stdout for s in shards), r.stdout
    gone = sorted((out / "frames" / "pool_frames").iterdir())[0]
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()
    r = subprocess.run([*cmd, "data", "verify", str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "MISSING" in r.stdout and "6 found, n_videos 7: MISMATCH" in r.stdout
    token = "hf_" + "NeverPrintMe0123456789"
    r = subprocess.run([*cmd, "data", "fetch", "lab/nope", "--kind", "frames", "--out", str(out)],
                       env={**env, "HF_TOKEN": token}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "lab/nope" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert fake_hub.requests[-1].authorization == f"Bearer {token}"  # the client did send it...
    assert token not in r.stdout + r.stderr  # ...and it appears nowhere we write
    assert not any(token in p.read_text() for p in (out / ".benchcheck").iterdir() if p.is_file())


def test_rerun_after_a_kill_mid_extraction_gives_the_same_result(fake_hub: FakeHub, frame_cache: Path,
                                                                  tmp_path: Path) -> None:
    shards = _publish(fake_hub, frame_cache, tmp_path)
    out = tmp_path / "pool"
    fetch_shards(_opts(fake_hub, out))
    log = out / ".benchcheck" / "extracted_frames.jsonl"
    first, second = log.read_text().splitlines()[:2]
    log.write_text(first + "\n" + second[: len(second) // 2])  # killed while appending the second row
    row2 = json.loads(second)
    victim = out / "frames" / "pool_frames" / row2["videos"][0] / "frame_1.jpg"
    good = victim.read_bytes()
    victim.write_bytes(good[:10])  # and mid-way through writing one of its files
    rep = fetch_shards(_opts(fake_hub, out))
    assert rep.good and rep.count is not None and rep.count.found == 7
    assert victim.read_bytes() == good
    status = {v.file: v.status for v in rep.verdicts}
    done_first = json.loads(first)["file"]
    assert status.pop(done_first) == "extracted" and set(status.values()) == {"ok"}
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{") and x.endswith("}")]
    assert sorted(r["file"] for r in rows) == sorted(shards)  # one complete row per shard, none twice


def test_moved_package_still_verifies_after_delete_shards(fake_hub: FakeHub, frame_cache: Path,
                                                          tmp_path: Path) -> None:
    from benchcheck.data.verify import find_targets, verify_manifest

    shards = _publish(fake_hub, frame_cache, tmp_path)
    fetch_shards(_opts(fake_hub, tmp_path / "pool", delete_shards=True))
    moved = tmp_path / "elsewhere"
    (tmp_path / "pool").rename(moved)
    (t,) = find_targets(moved)
    assert t.target == moved.resolve() / "frames" / "pool_frames"
    rep = verify_manifest(t.manifest, t.kind, t.target, t.out)
    assert rep.good and [v.status for v in rep.verdicts] == ["extracted"] * len(shards)
    assert all("shard deleted" in v.detail for v in rep.verdicts)


def test_rerun_keeps_reporting_refused_members(fake_hub: FakeHub, tmp_path: Path) -> None:
    blob = _tar([("vidA/frames.json", tarfile.REGTYPE, b"{}", None),
                 ("vidA/etc", tarfile.SYMTYPE, b"", None)])
    _publish_blobs(fake_hub, [blob], n_videos=1)
    out = tmp_path / "pool"
    (v,) = fetch_shards(_opts(fake_hub, out)).verdicts
    assert v.status == "refused"
    rep = fetch_shards(_opts(fake_hub, out))
    (v2,) = rep.verdicts
    assert v2.status == "refused" and "already extracted" in v2.detail and "'vidA/etc'" in v2.detail
    assert not rep.good
    env = {**os.environ, "HF_ENDPOINT": fake_hub.url}
    r = subprocess.run([str(Path(sys.executable).with_name("benchcheck")), "data", "fetch", "lab/frames",
                        "--kind", "frames", "--out", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "frames_000.tar: REFUSED MEMBERS (already extracted" in r.stdout, r.stdout
    r = subprocess.run([str(Path(sys.executable).with_name("benchcheck")), "data", "verify", str(out)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "REFUSED MEMBERS" in r.stdout  # fetch and verify agree


def test_bad_member_mtime_or_unwritable_name_fails_one_shard_not_the_fetch(fake_hub: FakeHub,
                                                                         tmp_path: Path) -> None:
    bad_times = _tar([(f"vid{i}/frames.json", tarfile.REGTYPE, b"{}", mt)
                      for i, mt in enumerate(["1e300", "-1e20", "nan"])])
    too_long = _tar([("vid3/frames.json", tarfile.REGTYPE, b"{}", None),
                     ("vid3/" + "x" * 300, tarfile.REGTYPE, b"?", None)])  # ENAMETOOLONG on extraction
    good = _tar([("vid4/frames.json", tarfile.REGTYPE, b"{}", None)])
    names = _publish_blobs(fake_hub, [bad_times, too_long, good], n_videos=5)
    out = tmp_path / "pool"
    rep = fetch_shards(_opts(fake_hub, out))
    status = {v.file: v for v in rep.verdicts}
    assert status[names[0]].status == "ok"  # the mtimes are not applied; the files are there
    target = out / "frames" / "pool_frames"
    for i in range(3):
        assert (target / f"vid{i}" / "frames.json").read_bytes() == b"{}"
    assert status[names[1]].status == "failed" and "OSError" in status[names[1]].detail
    assert status[names[2]].status == "ok" and (target / "vid4" / "frames.json").is_file()
    assert names[1] not in read_extracted(out, "frames")  # not logged: a rerun tries it again
    assert not rep.good


def _tar(members: list[tuple[str, bytes, bytes, str | None]]) -> bytes:
    """A tar of (name, type, data, pax mtime or None) members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, data, mtime in members:
            ti = tarfile.TarInfo(name)
            ti.type = kind
            if kind == tarfile.SYMTYPE:
                ti.linkname = "/etc"
            ti.size = len(data) if kind == tarfile.REGTYPE else 0
            if mtime is not None:
                ti.pax_headers = {"mtime": mtime}
            tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buf.getvalue()


def _publish_blobs(hub: FakeHub, blobs: list[bytes], n_videos: int) -> list[str]:
    names = [f"frames_{i:03d}.tar" for i in range(len(blobs))]
    for name, blob in zip(names, blobs, strict=True):
        hub.add_file("lab/frames", name, blob)
    hub.add_file("lab/frames", "frames_manifest.json", json.dumps(
        {"shards": [{"file": n, "sha256": hashlib.sha256(b).hexdigest()} for n, b in zip(names, blobs, strict=True)],
         "n_videos": n_videos}).encode())
    return names


def test_cli_items_fetch_counts_one_file_as_one(fake_hub: FakeHub, tmp_path: Path) -> None:
    """It said "1 files fetched ..., 1 problems"."""
    fake_hub.add_file("lab/one", "MVBench.jsonl", b'{"item_id": "MVBench_0"}\n')
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "HF_ENDPOINT": fake_hub.url, "PYTHONPATH": src}
    r = subprocess.run([sys.executable, "-m", "benchcheck", "data", "fetch", "lab/one", "--kind", "items", "--out",
                        str(tmp_path / "one")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"items: 1 file fetched into {tmp_path / 'one'}, 0 problems" in r.stdout.splitlines()
