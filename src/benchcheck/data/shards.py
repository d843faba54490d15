"""Build tar shards and their manifest from a local frame cache or video store (``make-shards``).

Each video folder goes whole into one shard, in sorted order, so a shard's members are
``<video_id>/...`` exactly as the original runs' ``tar -xf shard -C pool_frames`` expects. Shards are
deterministic (sorted members, owner 0, fixed modes, the files' own mtimes): a rerun after a
kill rebuilds byte-identical shards. Each shard is hashed while it is written and renamed into
place when complete; the manifest is written last.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from benchcheck.atomic import write_atomic, write_json_atomic
from benchcheck.data.manifest import (
    Manifest,
    ShardEntry,
    ShardKind,
    manifest_name,
    shard_name,
)
from benchcheck.errors import naming
from benchcheck.video.cache import FRAMES_JSON

META_JSON = "meta.json"
_BLOCK = 512
_RECORD = 20 * _BLOCK
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_size(text: str) -> int:
    """``"2GB"`` → 2·10⁹, ``"512MiB"`` → 512·2²⁰, ``"1000"`` → 1000 bytes."""
    m = _SIZE.match(text)
    unit = (m.group(2) or "").lower() if m else ""
    if not m or unit not in _UNITS:
        raise ValueError(f"size {text!r} is not a number with an optional unit (e.g. 2GB, 500MiB)")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return n


def marker_file(kind: ShardKind) -> str:
    """The file every complete video folder holds: ``frames.json`` or ``meta.json``."""
    return FRAMES_JSON if kind == "frames" else META_JSON


@dataclass(frozen=True, slots=True)
class VideoDir:
    """One video folder of the source: its id and its files (relative names, sizes), sorted."""

    video_id: str
    files: tuple[tuple[str, int], ...]

    @property
    def tar_bytes(self) -> int:
        """Bytes this folder takes in a tar: a header per member plus data padded to 512."""
        data = sum(-(-size // _BLOCK) * _BLOCK for _, size in self.files)
        return _BLOCK * (1 + len(self.files)) + data


@dataclass(slots=True)
class SourceScan:
    """The usable video folders of a source and one line per thing skipped."""

    videos: list[VideoDir] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def detect_kind(src: str | Path) -> ShardKind:
    """``frames`` when the first folder holding a marker has ``frames.json``, else ``videos``."""
    with os.scandir(src) as it:
        for e in sorted(it, key=lambda e: e.name):
            if e.is_dir(follow_symlinks=False):
                if os.path.isfile(os.path.join(e.path, FRAMES_JSON)):
                    return "frames"
                if os.path.isfile(os.path.join(e.path, META_JSON)):
                    return "videos"
    raise ValueError(f"{src}: no folder with {FRAMES_JSON} or {META_JSON}; not a frame cache or a video store")


def _walk_files(root: Path, rel: str, out: list[tuple[str, int]], problems: list[str]) -> None:
    with os.scandir(root / rel if rel else root) as it:
        for e in sorted(it, key=lambda e: e.name):
            name = f"{rel}/{e.name}" if rel else e.name
            if e.is_symlink():
                problems.append(f"{root.name}/{name}: symlink, not packed")
            elif e.is_dir():
                _walk_files(root, name, out, problems)
            elif e.is_file():
                out.append((name, e.stat().st_size))
            else:
                problems.append(f"{root.name}/{name}: not a regular file, not packed")


def scan_source(src: str | Path, kind: ShardKind) -> SourceScan:
    """The video folders of ``src`` that hold the kind's marker file, in sorted order."""
    scan = SourceScan()
    marker = marker_file(kind)
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            scan.problems.append(f"{e.path}: not a video folder, not packed")
            continue
        files: list[tuple[str, int]] = []
        _walk_files(Path(e.path), "", files, scan.problems)
        if not any(name == marker for name, _ in files):
            scan.problems.append(f"{e.path}: no {marker} (incomplete folder), not packed")
            continue
        scan.videos.append(VideoDir(e.name, tuple(files)))
    return scan


def plan_shards(videos: list[VideoDir], shard_bytes: int) -> list[list[VideoDir]]:
    """Fill shards in order up to ``shard_bytes``; a folder larger than that gets a shard alone (pure)."""
    shards: list[list[VideoDir]] = []
    cur: list[VideoDir] = []
    used = 2 * _BLOCK  # the end-of-archive blocks
    for v in videos:
        if cur and used + v.tar_bytes > shard_bytes:
            shards.append(cur)
            cur, used = [], 2 * _BLOCK
        cur.append(v)
        used += v.tar_bytes
    if cur:
        shards.append(cur)
    return shards


class _HashingWriter:
    """A write-only file wrapper that hashes what passes through it; a write error (a full disk)
    names ``name``, the shard."""

    def __init__(self, f: BinaryIO, name: Path) -> None:
        self._f = f
        self.name = name
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        with naming(self.name):
            return self._f.write(data)

    def tell(self) -> int:
        return self.size


def _info(name: str, size: int, mtime: int, is_dir: bool) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size = 0 if is_dir else size
    ti.mtime = mtime
    ti.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    ti.mode = 0o755 if is_dir else 0o644
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


# What a source file that changed under ``make-shards`` is told: something still writes the source.
_CHANGED = "make the shards again once nothing writes the source folder"


def _add_file(tf: tarfile.TarFile, fp: Path, arc: str, size: int) -> None:
    """One source file, ``size`` bytes as the scan found it; a read error names the file, and so
    does a file removed or cut short since the scan (something still writing the source)."""
    try:
        with naming(fp), fp.open("rb") as f:
            tf.addfile(_info(arc, size, int(fp.stat().st_mtime), False), f)
    except OSError as e:
        if e.filename != str(fp):
            raise  # the shard's own write (a full disk): it names the shard
        if isinstance(e, FileNotFoundError):
            raise OSError(e.errno, f"removed since make-shards listed it; {_CHANGED}", str(fp)) from e
        if e.errno is None:  # tarfile: fewer bytes to read than the scan found
            raise OSError(None, f"shorter than when make-shards listed it; {_CHANGED}", str(fp)) from e
        raise


def write_shard(path: Path, src: Path, videos: list[VideoDir],
                on_bytes: Callable[[int], None] | None = None) -> tuple[str, int]:
    """Write one shard atomically (``benchcheck.atomic``), hashing it as it is written; return (sha256, size)."""
    hashed: list[_HashingWriter] = []

    def write(raw: BinaryIO) -> None:
        hw = _HashingWriter(raw, path)
        hashed.append(hw)
        with tarfile.open(fileobj=hw, mode="w", format=tarfile.PAX_FORMAT) as tf:  # type: ignore[call-overload]
            for v in videos:
                vdir = src / v.video_id
                tf.addfile(_info(v.video_id, 0, int(vdir.stat().st_mtime), True))
                for name, size in v.files:
                    _add_file(tf, vdir / name, f"{v.video_id}/{name}", size)
                    if on_bytes is not None:
                        on_bytes(size)

    with naming(path):  # the last buffered bytes are written at close: a full disk names no file there
        write_atomic(path, write)
    hw = hashed[0]
    return hw.hash.hexdigest(), hw.size


@dataclass(slots=True)
class MakeShardsResult:
    """The manifest written, where, the folders skipped, and stale shards left in the folder."""

    manifest: Manifest
    manifest_path: Path
    problems: list[str]
    stale: list[str]


def make_shards(src: str | Path, out: str | Path, shard_bytes: int, kind: ShardKind | None = None,
                on_bytes: Callable[[int], None] | None = None) -> MakeShardsResult:
    """Pack ``src`` (a frame cache or a video store) into shards and a manifest under ``out``."""
    src_p, out_p = Path(src), Path(out)
    if not src_p.is_dir():
        raise ValueError(f"{src_p}: not a folder")
    kind = kind or detect_kind(src_p)
    scan = scan_source(src_p, kind)
    if not scan.videos:
        raise ValueError(f"{src_p}: no complete video folder to pack ({marker_file(kind)} missing everywhere)")
    plan = plan_shards(scan.videos, shard_bytes)
    out_p.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, group in enumerate(plan):
        name = shard_name(kind, i, len(plan))
        sha, size = write_shard(out_p / name, src_p, group, on_bytes)
        entries.append(ShardEntry(name, sha, size, len(group)))
    manifest = Manifest(tuple(entries), len(scan.videos), kind)
    mpath = out_p / manifest_name(kind)
    with naming(mpath):
        write_json_atomic(mpath, manifest.to_json(), indent=1)
    planned = {e.file for e in entries}
    stale = sorted(p.name for p in out_p.glob(f"{kind}_*.tar") if p.name not in planned)
    return MakeShardsResult(manifest, mpath, scan.problems, stale)
