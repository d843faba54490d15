"""The one video resolver: what an item names as its video -> the ``video_id`` of a stored video.

An item names its video in one of four forms (docs/items.md, "Videos"):

* a ``video_id``: the content hash of a normalized video (``video_id`` field);
* a store key ``local::<folder>::<path>`` or ``repo::zip::member`` (``video`` / ``video_key``):
  looked up in the store's index;
* a path relative to ``--videos DIR`` (``video``; a name without a suffix, such as a bare id,
  also matches the one video file of that name with a video extension): never outside DIR (``..``
  is refused for that item; a link inside DIR that leaves it is taken only as ``videos normalize
  DIR`` stored it, by its key, size and mtime, never read). With DIR it is looked up as the key
  DIR's normalization gave it, then by the file's absolute path (same size and mtime), then by
  the sha256 of its bytes, which is the video_id itself; without DIR, as the path below the
  folder of a ``local::`` key, when exactly one stored video has it;
* an absolute path: by absolute path in the index, then (inside ``--videos DIR`` only) by
  content hash; with DIR, a path outside it is refused for that item.

Every command that needs frames calls :func:`resolve_items` (frames extract, screen, sweep,
report, items stats/link), so an item reaches every step the same way. ``items link`` writes the
resolved ids into a derived items file, so later runs need no resolution.
"""

from __future__ import annotations

import os
import posixpath
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Literal

from benchcheck.filehash import sha256_file
from benchcheck.items.record import Item
from benchcheck.items.report import VideoCount
from benchcheck.video.index import StoreIndex
from benchcheck.video.meta import META_FILE, NORMALIZED
from benchcheck.video.normalize import content_hash_of
from benchcheck.video.store import VIDEO_EXTENSIONS

Status = Literal["stored", "unchecked", "not_normalized", "not_found", "refused", "none"]
# Statuses whose item gets a video_id (``unchecked``: no store to check it against).
FOUND: tuple[Status, ...] = ("stored", "unchecked")
# Per-item lines printed by a command before it says "N more".
SHOWN_LINES = 20


def confined_path(root: Path, rel: str, what: str = "videos folder") -> Path:
    """``root / rel``, refusing an absolute ``rel`` and any path that climbs out of ``root``
    (``..``, or a symlink inside it that points outside). The one rule for paths from item files."""
    if problem := path_problem(rel, what):
        raise ValueError(problem)
    pure = PurePosixPath(rel.replace("\\", "/"))
    base = root.resolve()
    path = _resolved(base / pure, rel)
    if not _within(base, path):
        raise ValueError(f"video path {rel!r} resolves outside the {what}")
    return path


def path_problem(rel: str, what: str = "videos folder") -> str | None:
    """Why ``rel`` may not name a file below a folder, as written (no file system call), or None:
    empty, a NUL, no file name's bytes, absolute, or a ``..`` part. ``confined_path`` checks this
    first; ``export`` writes no video path that fails it into a harness's file."""
    if not rel:
        return "empty video path"
    if "\x00" in rel:  # no file name holds one: said as such, not as an empty path
        return f"video path {rel!r} holds a NUL byte"
    if problem := unencodable(rel):
        return problem
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts:
        return dotdot_problem(rel, what)
    return None


def dotdot_problem(rel: str, what: str = "videos folder") -> str:
    """Why a path with an absolute start or a ``..`` part is refused. A ``..`` that climbs back
    inside (``cams/../a.mp4``) is refused too (paths are compared as written, with stored keys),
    but it leaves nothing: saying so sent the user looking for a folder outside."""
    pure = PurePosixPath(rel.replace("\\", "/"))
    inside = posixpath.normpath(pure.as_posix())
    if pure.is_absolute() or inside == ".." or inside.startswith("../"):
        return f"video path {rel!r} leaves the {what}"
    if inside == ".":
        return f"video path {rel!r} names the {what} itself, not a video"
    return f"video path {rel!r} has a '..' part, which item paths may not: write it as {inside!r}"


def unencodable(named: str) -> str | None:
    """Why ``named`` is no file name, or None. A name that is not UTF-8 on disk reaches Python with
    each bad byte as a lone surrogate, and encodes back to those bytes; any other lone surrogate (a
    JSON escape such as half an emoji) has no bytes, and the file system call raised."""
    try:
        os.fsencode(named)
    except UnicodeEncodeError:
        return f"video path {named!r} holds a lone surrogate that no file name has"
    return None


def _within(base: Path, path: Path) -> bool:
    """Whether the resolved ``path`` is the resolved ``base`` or below it."""
    return path == base or base in path.parents


def _resolved(path: Path, named: str) -> Path:
    """``path.resolve()``; a symlink loop (RuntimeError before Python 3.13) is a ValueError naming
    the path, so that it stays that item's one line."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as e:
        raise ValueError(f"video path {named!r} cannot be resolved ({e})") from e


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one item named, the video_id it resolved to (or None), and why not when it did not."""

    item: Item
    named: str | None
    status: Status
    video_id: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        # a path whose file name is not UTF-8 is said with its bad bytes escaped: every line that
        # prints a reason goes to a terminal or file that cannot write the lone surrogates
        # Python holds those bytes as
        object.__setattr__(self, "reason", self.reason.encode("utf-8", "backslashreplace").decode("utf-8"))

    @property
    def found(self) -> bool:
        return self.status in FOUND and self.video_id is not None

    @property
    def counted_as(self) -> VideoCount:
        """The ``items stats`` column of this status (``items.report.VideoOutcome``): a refused path
        counts as not found; ``unchecked`` (no store to check against) as found when it carries a
        video_id, else (a file under --videos, not hashed) as not normalized yet: the file is there
        and nothing says a store holds it (docs/items.md, "items stats")."""
        if self.status == "unchecked" and self.video_id is None:
            return "not_normalized"
        if self.status in FOUND:
            return "found"
        if self.status == "not_normalized":
            return "not_normalized"
        return "none" if self.status == "none" else "not_found"

    def line(self) -> str:
        where = f"{self.item.source_file}:{self.item.source_line}: " if self.item.source_file else ""
        return f"{where}{self.item.item_id}: {self.reason}"


def named_video(item: Item) -> str | None:
    """The text the item named its video with: a key or path (``meta.video_key``), else its video_id."""
    key = item.meta.get("video_key")
    if isinstance(key, str) and key.strip() and not item.has_frames_source:
        return key.strip()
    return item.video_id if item.has_frames_source else None


class VideoResolver:
    """Resolves items against a store (its index and ``normalized/``) and a videos folder.

    ``hash_files``: a file not found by its key or path in the index is hashed to find it by
    content (its video_id); off for a count that must not read every file (``items stats``
    without a store)."""

    def __init__(self, store: str | Path | None = None, videos: str | Path | None = None,
                 hash_files: bool = True) -> None:
        self.store = Path(store) if store else None
        self.videos = Path(videos) if videos else None
        self.hash_files = hash_files
        self.index = StoreIndex.load(self.store) if self.store else StoreIndex()
        self._hashes: dict[tuple[str, int, int], str] = {}
        self._stored: dict[str, bool] = {}

    def stored(self, video_id: str) -> bool:
        if self.store is None:
            return False
        if video_id not in self._stored:
            self._stored[video_id] = (self.store / NORMALIZED / video_id / META_FILE).is_file()
        return self._stored[video_id]

    def resolve(self, item: Item) -> Resolution:
        named = named_video(item)
        if named is None:
            return Resolution(item, None, "none", reason="names no video")
        if item.has_frames_source:
            if self.store is None:
                return Resolution(item, named, "unchecked", named)
            if self.stored(named):
                return Resolution(item, named, "stored", named)
            return Resolution(item, named, "not_found", reason=f"video_id {named!r} is not in the store "
                              f"({self.store / NORMALIZED / named} missing)")
        if "://" in named:
            return Resolution(item, named, "not_found", reason=f"video {named!r} is a URL: download it and "
                              "name the file (a path under --videos)")
        if "::" in named:
            return self._by_key(item, named)
        if Path(named).is_absolute():
            return self._by_absolute(item, named)
        return self._by_relative(item, named)

    def _by_absolute(self, item: Item, named: str) -> Resolution:
        """An absolute path is read (hashed) only inside ``--videos DIR``, the one folder an item's
        paths may reach; outside it, refused. Without DIR it is matched in the store's index by
        its path, size and mtime, and its bytes are never read: an item file cannot make a run
        read (or hash into its outputs) a file nobody pointed it at."""
        path = Path(named)
        if "\x00" in named:
            return Resolution(item, named, "refused", reason="video path holds a NUL byte")
        if problem := unencodable(named):
            return Resolution(item, named, "refused", reason=problem)
        if self.videos is not None:
            try:
                base, real = self.videos.resolve(), _resolved(path, named)
            except ValueError as e:
                return Resolution(item, named, "refused", reason=str(e))
            if not _within(base, real):
                return Resolution(item, named, "refused",
                                  reason=f"video path {named!r} is outside the videos folder ({self.videos})")
        return self._by_file(item, named, path, None, read=self.videos is not None)

    def _by_key(self, item: Item, key: str) -> Resolution:
        if self.store is None:
            return Resolution(item, key, "not_normalized", reason=f"video key {key!r}: give --store to look it up")
        vid = self.index.by_key(key)
        if vid and self.stored(vid):
            return Resolution(item, key, "stored", vid)
        return Resolution(item, key, "not_found", reason=f"video key {key!r} is not in {self.store}/index.jsonl")

    def _by_relative(self, item: Item, rel: str) -> Resolution:
        if self.videos is not None:
            try:
                path = confined_path(self.videos, rel)
            except ValueError as e:
                return self._linked_out(item, rel, rel) or Resolution(item, rel, "refused",
                                                                      reason=f"{e} ({self.videos})")
            posix = PurePosixPath(rel.replace("\\", "/")).as_posix()
            if not path.exists() and not path.suffix:  # a bare id ("4004") names 4004.mp4 or the like
                found = [path.with_name(path.name + ext) for ext in sorted(VIDEO_EXTENSIONS)
                         if path.with_name(path.name + ext).is_file()]
                if len(found) == 1:  # confined again: the file found may be a symlink leaving DIR
                    posix += found[0].suffix
                    try:
                        path = confined_path(self.videos, posix)
                    except ValueError as e:
                        return self._linked_out(item, rel, posix) or Resolution(item, rel, "refused",
                                                                                reason=f"{e} ({self.videos})")
            return self._by_file(item, rel, path, f"local::{self.videos.resolve().name}::{posix}")
        pure = PurePosixPath(rel.replace("\\", "/"))
        if ".." in pure.parts or "\x00" in rel:
            reason = dotdot_problem(rel) if "\x00" not in rel else f"video path {rel!r} holds a NUL byte"
            return Resolution(item, rel, "refused", reason=reason)
        if self.store is None:
            return Resolution(item, rel, "not_normalized",
                              reason=f"video {rel!r}: give --videos DIR (the folder it is in) or --store")
        posix = PurePosixPath(rel.replace("\\", "/")).as_posix()
        names = [posix] + ([posix + ext for ext in sorted(VIDEO_EXTENSIONS)] if not PurePosixPath(posix).suffix else [])
        hashes = list(dict.fromkeys(h for n in names for h in self.index.by_relative(n) if self.stored(h)))
        if len(hashes) == 1:
            return Resolution(item, rel, "stored", hashes[0])
        if hashes:
            return Resolution(item, rel, "not_found", reason=f"video {rel!r} names {len(hashes)} different "
                              "stored videos (folders normalized apart): give --videos DIR")
        failed = [r for n in names for r in self.index.failures_below(n)]
        if len(failed) == 1:  # normalized and failed: normalizing that folder again changes nothing
            return Resolution(item, rel, "not_found", reason=f"video {rel!r} could not be normalized: "
                              f"{failed[0]} ({self.store}/failures.jsonl)")
        return Resolution(item, rel, "not_found", reason=f"video {rel!r} is not in {self.store}/index.jsonl: "
                          "give --videos DIR (the folder it is in), or normalize that folder")

    def _linked_out(self, item: Item, named: str, rel: str) -> Resolution | None:
        """A path below ``--videos DIR`` through a link that leaves DIR, taken only as the user's own
        ``videos normalize DIR`` stored it: DIR's key for that path, a file of the same size and
        mtime. Nothing is read (a stat), so an item file still reaches no file outside DIR that
        nobody normalized; None when that does not hold (the path is refused)."""
        assert self.videos is not None
        pure = PurePosixPath(rel.replace("\\", "/"))
        if not rel or "\x00" in rel or unencodable(rel) or pure.is_absolute() or ".." in pure.parts:
            return None
        try:
            st = (self.videos / pure).stat()
        except OSError:
            return None
        key = f"local::{self.videos.resolve().name}::{pure.as_posix()}"
        vid = self.index.by_key(key) if self.index.row_matches(key, st.st_size, st.st_mtime_ns) else None
        return Resolution(item, named, "stored", vid) if vid and self.stored(vid) else None

    def _by_file(self, item: Item, named: str, path: Path, key: str | None, read: bool = True) -> Resolution:
        try:
            st = path.stat()
        except OSError:
            where = f" under {self.videos}" if key else ""
            return Resolution(item, named, "not_found", reason=f"no such video file{where}: {path}")
        if not path.is_file():
            return Resolution(item, named, "not_found", reason=f"video {path} is not a file")
        resolved = path.resolve()
        vid = None
        if key and self.index.row_matches(key, st.st_size, st.st_mtime_ns):
            vid = self.index.by_key(key)
        vid = vid or self.index.by_file(resolved, st.st_size, st.st_mtime_ns)
        if vid is None and self.hash_files and read:
            vid = self._content_hash(resolved, st.st_size, st.st_mtime_ns)
        if self.store is None:
            if vid is None and not read:  # an absolute path, no --videos: nothing may read it
                return Resolution(item, named, "not_normalized", reason=f"video {path}: an absolute path outside "
                                  "--videos is looked up in the store's index only: give --store, or --videos DIR "
                                  "(a folder holding it)")
            return Resolution(item, named, "unchecked", vid)
        if vid and self.stored(vid):
            return Resolution(item, named, "stored", vid)
        failed = self.index.failure(key, st.st_size, st.st_mtime_ns) if key else None
        if failed is not None:  # normalizing again changes nothing: say why it failed
            return Resolution(item, named, "not_found", reason=f"video {path} could not be normalized: {failed} "
                              f"({self.store}/failures.jsonl)")
        folder = self.videos or path.parent
        rel = PurePosixPath(key.split("::", 2)[2]) if key else PurePosixPath(path.name)
        if any(part.startswith(".") for part in rel.parts) or path.suffix.lower() not in VIDEO_EXTENSIONS:
            # a folder's normalization skips hidden files and other suffixes: name the file itself
            return Resolution(item, named, "not_normalized", reason=f"video {path} is not in {self.store}: "
                              f"normalizing {folder} skips it (hidden, or not a video suffix); run "
                              f"'benchcheck videos normalize {path} --store {self.store}'")
        return Resolution(item, named, "not_normalized", reason=f"video {path} is not in {self.store} yet: run "
                          f"'benchcheck videos normalize {folder} --store {self.store}'")

    def _content_hash(self, path: Path, size: int, mtime_ns: int) -> str | None:
        k = (str(path), size, mtime_ns)
        if k not in self._hashes:
            try:
                self._hashes[k] = content_hash_of(sha256_file(path))
            except OSError:
                return None
        return self._hashes[k]


@dataclass(slots=True)
class Resolved:
    """Items with their resolved video_ids set (the others as they were) and every resolution."""

    items: list[Item] = field(default_factory=list)
    resolutions: list[Resolution] = field(default_factory=list)

    def count(self, *statuses: Status) -> int:
        return sum(r.status in statuses for r in self.resolutions)

    @property
    def unresolved(self) -> list[Resolution]:
        """Items that name a video but did not reach one: each with its one-line reason."""
        return [r for r in self.resolutions if r.status not in FOUND and r.status != "none"]

    def summary(self) -> str:
        c = Counter(r.status for r in self.resolutions)
        return (f"videos: {c['stored'] + c['unchecked']} items with a video found, {c['not_normalized']} not "
                f"normalized yet, {c['not_found'] + c['refused']} not found, {c['none']} name no video")


def resolve_items(items: Sequence[Item], store: str | Path | None = None, videos: str | Path | None = None,
                  *, hash_files: bool = True) -> Resolved:
    """Every item resolved (module doc). A found item gets ``video_id`` and keeps what it named in
    ``meta.video_key``; the others are returned unchanged (their steps say NO_VIDEO)."""
    resolver = VideoResolver(store, videos, hash_files)
    out = Resolved()
    for item in items:
        r = resolver.resolve(item)
        out.resolutions.append(r)
        if r.found and r.video_id != item.video_id:
            meta = {**item.meta, "video_key": r.named} if r.named != r.video_id else item.meta
            item = replace(item, video_id=r.video_id, meta=meta)
        out.items.append(item)
    return out


def needs_resolving(items: Sequence[Item]) -> bool:
    """True when some item names its video by key or path (not yet by video_id)."""
    return any(named_video(i) not in (None, i.video_id) for i in items)


def report_unresolved(resolved: Resolved, echo: Callable[[str], None], shown: int = SHOWN_LINES,
                      summary: bool = True) -> None:
    """One line per item whose video was not reached (the first ``shown``), then the summary
    (``summary=False``: a caller that prints the summary itself, once)."""
    bad = resolved.unresolved
    for r in bad[:shown]:
        echo(f"no video: {r.line()}")
    if len(bad) > shown:
        echo(f"no video: ... and {len(bad) - shown} more items (benchcheck items stats lists the counts)")
    if bad and summary:
        echo(resolved.summary())
