"""Safe extraction: a malicious tar writes nothing outside its target and names what it refused."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

from benchcheck.data.safe_tar import safe_extract


def _add(tf: tarfile.TarFile, name: str, data: bytes = b"", **kw: object) -> None:
    ti = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.isreg():
        ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data) if ti.isreg() else None)


def _evil_tar(path: Path) -> Path:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        _add(tf, "vid1/frame_0.jpg", b"good")
        _add(tf, "../escape.txt", b"evil")
        _add(tf, "vid1/../../escape2.txt", b"evil")
        _add(tf, "/tmp/abs_evil.txt", b"evil")
        _add(tf, "vid1/etc", type=tarfile.SYMTYPE, linkname="/etc")
        _add(tf, "vid1/etc/passwd_copy", b"evil")
        _add(tf, "vid1/hard", type=tarfile.LNKTYPE, linkname="/etc/passwd")
        _add(tf, "vid1/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        _add(tf, "vid1/disk", type=tarfile.BLKTYPE, devmajor=8, devminor=0)
        _add(tf, "vid1/pipe", type=tarfile.FIFOTYPE)
        _add(tf, "./vid2/frames.json", b"{}")
    return path


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_malicious_members_are_refused_and_named(tmp_path: Path) -> None:
    tar = _evil_tar(tmp_path / "evil.tar")
    target = tmp_path / "a" / "b" / "target"
    before = _snapshot(tmp_path)
    res = safe_extract(tar, target)
    refused = {r.member: r.reason for r in res.refused}
    assert set(refused) == {"../escape.txt", "vid1/../../escape2.txt", "/tmp/abs_evil.txt", "vid1/etc",
                            "vid1/hard", "vid1/null", "vid1/disk", "vid1/pipe"}
    assert "absolute" in refused["/tmp/abs_evil.txt"]
    assert "'..'" in refused["../escape.txt"]
    assert "/etc" in refused["vid1/etc"] and "link" in refused["vid1/etc"]
    assert refused["vid1/null"] == "device file"
    # The symlink was refused, so vid1/etc/passwd_copy lands in a real folder inside the target.
    assert (target / "vid1" / "etc" / "passwd_copy").read_bytes() == b"evil"
    assert not (target / "vid1" / "etc").is_symlink()
    assert (target / "vid1" / "frame_0.jpg").read_bytes() == b"good"
    assert (target / "vid2" / "frames.json").is_file()
    assert res.top_level == {"vid1", "vid2"}
    new = _snapshot(tmp_path) - before
    assert all(p.startswith("a") for p in new), new  # nothing written beside the target
    assert not Path("/tmp/abs_evil.txt").exists()
    assert not any(p.is_symlink() for p in target.rglob("*"))


def test_planted_symlink_in_target_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    os.symlink(outside, target / "vid1")  # a folder on the way is a link out
    os.symlink(outside / "victim", target / "top.txt")  # a file path is a link out
    tar = tmp_path / "t.tar"
    with tarfile.open(tar, "w") as tf:
        _add(tf, "vid1/frame_0.jpg", b"x")
        _add(tf, "top.txt", b"replaced")
    res = safe_extract(tar, target)
    assert [r.member for r in res.refused] == ["vid1/frame_0.jpg"]
    assert "symlink" in res.refused[0].reason
    assert list(outside.iterdir()) == []
    assert not (target / "top.txt").is_symlink() and (target / "top.txt").read_bytes() == b"replaced"


def test_re_extraction_overwrites_a_truncated_file(tmp_path: Path) -> None:
    tar = tmp_path / "t.tar"
    with tarfile.open(tar, "w") as tf:
        _add(tf, "v/frame_0.jpg", b"0123456789")
    target = tmp_path / "target"
    (target / "v").mkdir(parents=True)
    (target / "v" / "frame_0.jpg").write_bytes(b"0123")  # a kill mid-write left this
    res = safe_extract(tar, target)
    assert (target / "v" / "frame_0.jpg").read_bytes() == b"0123456789"
    assert res.files == 1 and res.bytes == 10 and not res.refused


def test_unusable_pax_mtimes_are_not_applied(tmp_path: Path) -> None:
    tar = tmp_path / "t.tar"
    with tarfile.open(tar, "w", format=tarfile.PAX_FORMAT) as tf:
        for i, mt in enumerate(["1e300", "-1e20", "nan", "inf", "1700000000.5"]):
            _add(tf, f"v/f{i}", b"x", pax_headers={"mtime": mt})
    target = tmp_path / "target"
    res = safe_extract(tar, target)
    assert res.files == 5 and not res.refused
    assert (target / "v" / "f4").stat().st_mtime == 1700000000.5
    assert all(abs((target / "v" / f"f{i}").stat().st_mtime - time.time()) < 600 for i in range(4))
