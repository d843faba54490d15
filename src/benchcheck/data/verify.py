"""Check shards against their manifest and unpack them; count the videos (docs/PROTOCOL.md, "Returns").

Used by ``data fetch`` (after each download) and ``data verify`` (on what is already on disk).
A shard is hashed in a streamed pass before anything is extracted; a mismatch is reported and
nothing of it is extracted.
"""

from __future__ import annotations

import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchcheck.data.layout import (
    RecordError,
    count_videos,
    is_extracted,
    log_extracted,
    read_extracted,
    read_record,
    relative_to_out,
)
from benchcheck.data.manifest import (
    KINDS,
    Manifest,
    ManifestError,
    ShardEntry,
    ShardKind,
    load_manifest,
    manifest_name,
    sha256_file,
)
from benchcheck.data.safe_tar import safe_extract, would_refuse
from benchcheck.data.shards import marker_file

Status = Literal["ok", "extracted", "mismatch", "missing", "refused", "unreadable", "failed"]
GOOD: frozenset[str] = frozenset({"ok", "extracted"})
_MAX_SHOWN = 10


@dataclass(frozen=True, slots=True)
class ShardVerdict:
    """One shard's outcome: ``ok`` (hash verified), ``extracted`` (done earlier), or a problem."""

    file: str
    status: Status
    detail: str = ""

    @property
    def good(self) -> bool:
        return self.status in GOOD

    def line(self) -> str:
        word = {"ok": "OK", "extracted": "OK", "mismatch": "SHA256 MISMATCH", "missing": "MISSING",
                "refused": "REFUSED MEMBERS", "unreadable": "UNREADABLE", "failed": "FAILED"}[self.status]
        return f"{self.file}: {word}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class VideoCount:
    """The number of video folders in the target against the manifest's ``n_videos``."""

    found: int
    expected: int | None
    incomplete: tuple[str, ...] = ()

    @property
    def good(self) -> bool:
        return (self.expected is None or self.found == self.expected) and not self.incomplete

    def line(self) -> str:
        exp = "unknown" if self.expected is None else str(self.expected)
        verdict = "OK" if self.good else "MISMATCH"
        extra = ""
        if self.incomplete:
            shown = ", ".join(self.incomplete[:5])
            extra = f"; {len(self.incomplete)} folders without their marker file (e.g. {shown})"
        return f"videos: {self.found} found, n_videos {exp}: {verdict}{extra}"


@dataclass(slots=True)
class ShardsReport:
    """All shard verdicts of one manifest and the final count."""

    kind: ShardKind
    verdicts: list[ShardVerdict] = field(default_factory=list)
    count: VideoCount | None = None

    @property
    def good(self) -> bool:
        return all(v.good for v in self.verdicts) and (self.count is None or self.count.good)

    def summary(self) -> str:
        n_good = sum(v.good for v in self.verdicts)
        return f"{self.kind}: {n_good}/{len(self.verdicts)} shards OK"


def unpack_shard(path: Path, entry: ShardEntry, target: Path, out: Path, kind: ShardKind,
                 delete_bad: bool = False, delete_after: bool = False,
                 on_bytes: Callable[[int], None] | None = None) -> ShardVerdict:
    """Verify ``path`` against ``entry``; extract it into ``target`` only when the hash matches.

    The extraction is logged (with its video ids) before the optional deletion of the shard, so
    a kill at any point leaves either a shard to redo or a logged, complete extraction.
    """
    sha = sha256_file(path)
    if sha != entry.sha256:
        note = f"got {sha[:12]}…, manifest {entry.sha256[:12]}…; not extracted"
        if delete_bad:
            path.unlink(missing_ok=True)
            note += "; deleted so a rerun downloads it again"
        return ShardVerdict(entry.file, "mismatch", note)
    try:
        res = safe_extract(path, target, on_bytes)
    except (tarfile.TarError, EOFError) as e:
        return ShardVerdict(entry.file, "unreadable", f"hash matches but the tar cannot be read: {e}")
    except (OSError, ValueError, OverflowError) as e:
        # Disk full, a name the filesystem refuses, a value the OS cannot take: this shard fails
        # (it is not logged, so a rerun extracts it again) and the others still go on.
        return ShardVerdict(entry.file, "failed", f"extraction failed: {type(e).__name__}: {e}")
    refused = [str(r) for r in res.refused]
    rel_target = relative_to_out(target.resolve(), out.resolve())
    log_extracted(out, kind, {"file": entry.file, "sha256": entry.sha256, "target": rel_target,
                              "files": res.files, "bytes": res.bytes, "videos": sorted(res.top_level),
                              "refused": refused, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    if delete_after:
        path.unlink(missing_ok=True)
    detail = f"{len(res.top_level)} videos, {res.files} files"
    if refused:
        return ShardVerdict(entry.file, "refused", f"{detail}; {len(refused)} refused members: {_first(refused)}")
    return ShardVerdict(entry.file, "ok", detail + (", shard deleted" if delete_after else ""))


def _first(members: list[str]) -> str:
    """The first refused members and how many more: a whole refused folder is thousands of them, and
    the full list is in the extraction log."""
    more = f"; ... and {len(members) - _MAX_SHOWN} more" if len(members) > _MAX_SHOWN else ""
    return "; ".join(members[:_MAX_SHOWN]) + more


def check_count(target: Path, manifest: Manifest, kind: ShardKind) -> VideoCount:
    found, incomplete = count_videos(target, marker_file(kind))
    return VideoCount(found, manifest.n_videos, tuple(incomplete))


def _verify_shard(entry: ShardEntry, shard_dir: Path, target: Path | None, out: Path | None,
                  logged: dict[str, dict[str, Any]]) -> ShardVerdict:
    path = shard_dir / entry.file
    row = logged.get(entry.file)
    known = target is not None and out is not None and is_extracted(row, entry.sha256, target, out)
    done = row if known else None
    refused: list[str] = list(done.get("refused") or []) if done else []
    if done is not None and target is not None:
        videos = done.get("videos")
        gone = [v for v in videos if not (target / str(v)).is_dir()] if isinstance(videos, list) else []
        if gone:
            return ShardVerdict(entry.file, "missing",
                                f"{len(gone)} of its videos are gone from the target (e.g. {gone[0]})")
    if not path.is_file():
        if done is not None:
            status: Status = "refused" if refused else "extracted"
            return ShardVerdict(entry.file, status, "extracted earlier, shard deleted"
                                + (f"; {len(refused)} refused members" if refused else ""))
        return ShardVerdict(entry.file, "missing", "listed in the manifest, not on disk and not extracted")
    sha = sha256_file(path)
    if sha != entry.sha256:
        return ShardVerdict(entry.file, "mismatch", f"got {sha[:12]}…, manifest {entry.sha256[:12]}…")
    if refused:
        return ShardVerdict(entry.file, "refused", f"extracted; {len(refused)} refused members")
    if done is not None:
        return ShardVerdict(entry.file, "ok", "extracted")
    # Not extracted yet: say now which members extraction would refuse, not "OK" and a surprise later.
    try:
        unsafe = would_refuse(path)
    except (tarfile.TarError, EOFError, OSError) as e:
        return ShardVerdict(entry.file, "unreadable", f"hash matches but the tar cannot be read: {e}")
    if unsafe:
        return ShardVerdict(entry.file, "refused", f"not extracted yet; extraction would refuse {len(unsafe)} "
                                                   f"members: {_first([str(r) for r in unsafe])}")
    return ShardVerdict(entry.file, "ok", "not extracted yet")


def verify_manifest(manifest_path: Path, kind: ShardKind, target: Path | None, out: Path | None,
                    on_shard: Callable[[ShardVerdict], None] | None = None) -> ShardsReport:
    """Hash every shard of a manifest that is on disk and count the videos in ``target``."""
    manifest = load_manifest(manifest_path)
    logged = read_extracted(out, kind) if out is not None else {}
    report = ShardsReport(kind)
    for entry in manifest.shards:
        v = _verify_shard(entry, manifest_path.parent, target, out, logged)
        report.verdicts.append(v)
        if on_shard is not None:
            on_shard(v)
    if target is not None:
        report.count = check_count(target, manifest, kind)
    return report


@dataclass(frozen=True, slots=True)
class VerifyTarget:
    """One manifest to verify: where it is, its kind, the extraction target and the fetch folder."""

    manifest: Path
    kind: ShardKind
    target: Path | None
    out: Path | None


def find_targets(path: str | Path, target: str | Path | None = None) -> list[VerifyTarget]:
    """What ``data verify PATH`` checks: the fetches recorded under PATH, or a manifest in PATH.

    Raises :class:`ManifestError` when PATH holds neither.
    """
    p = Path(path)
    found: list[VerifyTarget] = []
    for kind in KINDS:
        try:
            rec = read_record(p, kind)
        except RecordError as e:
            raise ManifestError(str(e)) from None
        if rec is not None:
            found.append(VerifyTarget(Path(rec.manifest), kind, Path(target) if target else Path(rec.target), p))
    if found:
        return found
    for kind in KINDS:
        m = p if p.is_file() and p.name == manifest_name(kind) else p / manifest_name(kind)
        if m.is_file():
            found.append(VerifyTarget(m, kind, Path(target) if target else None, None))
    if not found:
        raise ManifestError(f"{p}: no fetch record (.benchcheck/fetch_*.json) and no "
                            f"{manifest_name('frames')} or {manifest_name('videos')}")
    return found
