"""Normalize many source videos into the store, idempotently, in parallel processes.

``<store>/normalized/<content_hash>/{video.mp4, meta.json}``, ``<store>/index.jsonl`` (key ->
content hash, the original runs' manifest format) and ``<store>/failures.jsonl`` (one row per source
that could not be normalized, with the reason).

* **video_id** = :func:`~benchcheck.video.normalize.content_hash_of` the source bytes: the
  first 32 hex digits of their sha256. The same file under two keys is stored once.
* **Keys**: a folder given as a source contributes every file below it with a video extension
  (hidden entries skipped; linked folders followed; a dangling link fails on its line), keyed
  ``local::<folder name>::<relative path>``; a file given directly is keyed
  ``local::<its folder's name>::<file name>``. ``keys`` (one per source) overrides: a full key
  for a file, a ``repo::zip_path`` prefix for a folder. A key that a run meets for a second,
  different file (two source folders of the same name) leaves that file out as failed, and so
  does a key an earlier run stored for another file (another path and other bytes).
* **Idempotent**: a key whose last index row is ``done`` for a source of the same size and
  modification time, with its ``meta.json`` present, is skipped without reading the file.
* **One writer**: a run holds the store's lease (``.leases/`` beside ``index.jsonl``); a second
  run on the same store stops before it writes (:class:`StoreBusy`).
* **Crash safe**: a video is written to ``normalized/.tmp-*`` and renamed into place whole;
  its index row is appended after the rename. A kill leaves at most a temp folder (cleared by
  the next run) or a stored video without its row (the next run finds it by hash and only
  appends the row).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic
from benchcheck.errors import shown
from benchcheck.filehash import sha256_file
from benchcheck.lease import holder, try_lease
from benchcheck.masking import drop_secret_variables
from benchcheck.video.cache import clear_stale
from benchcheck.video.index import (
    FAILURES_FILE,
    INDEX_FILE,
    RESOLVED,
    append_index,
    done_rows,
    last_failures,
    local_key,
)
from benchcheck.video.meta import META_FILE, NORMALIZED, VIDEO_FILE, read_meta
from benchcheck.video.normalize import NormalizeError, content_hash_of, stored_meta, transcode
from benchcheck.workers import process_pool

VIDEO_EXTENSIONS = frozenset({".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", ".flv", ".mpg", ".mpeg",
                              ".ts", ".wmv", ".3gp", ".ogv", ".mts", ".m2ts", ".vob"})


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: Path
    key: str


@dataclass(frozen=True, slots=True)
class NormalizeOutcome:
    """One source: ``done`` (stored now), ``exists`` (already stored under its hash),
    ``skipped`` (index says done) or ``failed`` (``reason`` says why)."""

    key: str
    path: str
    status: str
    content_hash: str | None = None
    reason: str | None = None
    n_frames: int = 0
    too_short: bool = False
    seconds: float = 0.0
    source_sha256: str | None = None
    # What its stored times assume (``meta.json``'s ``source.timing``): a source without timestamps.
    warning: str | None = None

    def failed_line(self) -> str:
        """The ``failed:`` line a command prints for it: one line whatever the file's name."""
        return f"failed: {shown(self.path)}: {self.reason}"

    def warning_line(self) -> str | None:
        """The ``warning:`` line a command prints for it, if any: one line whatever the file's name."""
        return f"warning: {shown(self.path)}: {self.warning}" if self.warning else None


@dataclass(slots=True)
class NormalizeReport:
    """Every outcome of a run and where the index and failures went."""

    store: Path
    outcomes: list[NormalizeOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def failures(self) -> list[NormalizeOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def index_path(self) -> Path:
        return self.store / INDEX_FILE

    @property
    def failures_path(self) -> Path:
        return self.store / FAILURES_FILE

    def lines(self) -> list[str]:
        """The lines a command prints on stderr, one a source: a ``warning:`` for each source whose
        stored times are an assumption, then a ``failed:`` for each failure."""
        warnings = [line for o in self.outcomes if (line := o.warning_line()) is not None]
        return warnings + [o.failed_line() for o in self.failures]

    def summary(self) -> str:
        return (f"{self.count('done')} normalized, {self.count('exists')} already stored, "
                f"{self.count('skipped')} skipped (done before), {self.count('failed')} failed")


def collect_sources(sources: Sequence[Path], keys: Sequence[str] | None = None,
                    clashes: list[tuple[SourceFile, SourceFile]] | None = None,
                    store: Path | None = None) -> list[SourceFile]:
    """The files to normalize with their keys (module doc). A key met again for the same file is
    dropped; for another file (two source folders of the same name), that file is dropped too and,
    with ``clashes``, listed there as (dropped, kept): the index holds one file per key. A source
    folder holding ``store`` skips it: each run stored the last run's outputs again as new videos."""
    if keys is not None and len(keys) != len(sources):
        raise ValueError("give one key per source")
    found: dict[str, SourceFile] = {}

    def add(source: SourceFile) -> None:
        kept = found.setdefault(source.key, source)
        if kept is not source and clashes is not None and os.path.realpath(kept.path) != os.path.realpath(source.path):
            clashes.append((source, kept))

    for n, src in enumerate(sources):
        src = Path(src)
        given = keys[n] if keys is not None else None
        if src.is_dir():
            prefix = given or f"local::{src.resolve().name}"
            for path in _folder_videos(src, store):
                rel = path.relative_to(src)
                key = f"{prefix}::{rel.as_posix()}" if given else local_key(src.resolve().name, rel.as_posix())
                add(SourceFile(path, key))
        else:
            add(SourceFile(src, given or local_key(src.resolve().parent.name, src.name)))
    return list(found.values())


def _folder_videos(folder: Path, store: Path | None = None) -> list[Path]:
    """The files below ``folder`` with a video extension, sorted, hidden entries skipped. Linked
    folders are followed (each real folder once, so a link loop ends; rglob skipped them, and their
    clips with them, without a word), and a link with a video
    extension is taken even when its target is missing: it fails on its own line instead of
    vanishing from the run. The folder ``store``, when below, is not walked."""
    out: list[Path] = []
    seen: set[str] = {os.path.realpath(store)} if store is not None else set()
    for top, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        # real folders before links, in name order: the walk, so the keys, never depend on the
        # file system's listing order
        dirs[:] = sorted((d for d in dirs if not d.startswith(".")),
                         key=lambda d: (os.path.islink(os.path.join(top, d)), d))
        for name in files:
            path = Path(top, name)
            if (not name.startswith(".") and path.suffix.lower() in VIDEO_EXTENSIONS
                    and (path.is_file() or path.is_symlink())):
                out.append(path)
    return sorted(out)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _timing(source: dict[str, Any]) -> str | None:
    """What a stored source's times assume, if it says (``normalize.assumed_timing``)."""
    timing = source.get("timing")
    return timing if isinstance(timing, str) else None


def normalize_one(src: SourceFile, store: Path, threads: int = 1) -> NormalizeOutcome:
    """Normalize one source into the store (runs in a worker process; never raises)."""
    t0 = time.monotonic()
    path = str(src.path)
    try:
        if not src.path.is_file():
            if src.path.is_symlink():
                raise NormalizeError(f"a link to {shown(os.readlink(src.path))}, which does not exist (or loops)")
            raise NormalizeError("not a file (missing or a folder)")
        if src.path.stat().st_size == 0:
            raise NormalizeError("empty file (0 bytes)")
        sha = sha256_file(src.path)
        h = content_hash_of(sha)
        final = store / NORMALIZED / h
        if (final / META_FILE).is_file():
            meta = read_meta(store, h)
            return NormalizeOutcome(src.key, path, "exists", h, None, meta.n_frames, meta.too_short,
                                    time.monotonic() - t0, sha, _timing(meta.source))
        tmp = store / NORMALIZED / f".tmp-{h}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            target, facts = transcode(src.path, tmp / VIDEO_FILE, threads)
            facts.update({"path": str(src.path.resolve()), "key": src.key,
                          "size": src.path.stat().st_size, "sha256": sha})
            meta = stored_meta(tmp / VIDEO_FILE, h, target, facts)
            write_json_atomic(tmp / META_FILE, meta.to_json())
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / META_FILE).is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return NormalizeOutcome(src.key, path, "done", h, None, meta.n_frames, meta.too_short,
                                time.monotonic() - t0, sha, _timing(facts))
    except NormalizeError as e:
        return NormalizeOutcome(src.key, path, "failed", reason=str(e), seconds=time.monotonic() - t0)
    except (OSError, ValueError) as e:
        reason = " ".join(str(e).split())[:300] or type(e).__name__
        return NormalizeOutcome(src.key, path, "failed", reason=reason, seconds=time.monotonic() - t0)
    except Exception as e:  # a decoder or library bug on one file: that file's failure, not the run's
        reason = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        return NormalizeOutcome(src.key, path, "failed", reason=f"unexpected error: {reason}",
                                seconds=time.monotonic() - t0)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _clear_failure(store: Path, failures: dict[str, dict[str, Any]], o: NormalizeOutcome) -> None:
    """A source listed as failed that is stored now gets a ``status="stored"`` row in
    ``failures.jsonl``: the file never lists as failed what the index has."""
    if failures.pop(o.key, None) is not None:
        append_index(store / FAILURES_FILE, [{"key": o.key, "source": o.path, "status": RESOLVED,
                                              "content_hash": o.content_hash, "time": _now()}])


def _index_row(o: NormalizeOutcome, stat: tuple[int, int] | None) -> dict[str, Any]:
    return {"key": o.key, "status": "done", "content_hash": o.content_hash, "source": o.path,
            "source_path": str(Path(o.path).resolve()),
            "source_size": stat[0] if stat else None, "source_mtime_ns": stat[1] if stat else None,
            "source_sha256": o.source_sha256, "n_frames": o.n_frames, "too_short": o.too_short,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _is_done(src: SourceFile, row: dict[str, Any] | None, store: Path) -> bool:
    """The index says done for this very file (same size and mtime) and its video is there."""
    if row is None or not (store / NORMALIZED / str(row["content_hash"]) / META_FILE).is_file():
        return False
    stat = _stat(src.path)
    return stat is not None and (row.get("source_size"), row.get("source_mtime_ns")) == stat


def _stored_for_another(src: SourceFile, row: dict[str, Any] | None) -> str | None:
    """The file an earlier run stored under ``src``'s key when that is another file (another path
    and other bytes), else None. The same path is the same source, replaced or touched since: it is
    normalized again. Other bytes are told by the sha256 the row records; a row without one (the
    original runs' manifest) cannot tell, and is taken as the same source."""
    if row is None or not isinstance(row.get("source_sha256"), str):
        return None
    recorded = row.get("source_path") or row.get("source")
    if not isinstance(recorded, str):
        return None
    try:
        if os.path.realpath(recorded) == os.path.realpath(src.path) or sha256_file(src.path) == row["source_sha256"]:
            return None
    except OSError:  # unreadable now: its own failure says so
        return None
    return recorded


def _key_clash(src: SourceFile, holder: str, whose: str) -> NormalizeOutcome:
    """``src`` left out: its key is ``holder``'s (``whose`` says since when and where)."""
    return NormalizeOutcome(
        src.key, str(src.path), "failed",
        reason=f"not normalized: its key {shown(src.key)} is {whose.format(shown(holder))}; normalize them into "
               "different stores, or rename one folder")


Work = Callable[[SourceFile, Path, int], NormalizeOutcome]


def _died(src: SourceFile, e: BaseException) -> NormalizeOutcome:
    what = "worker process died" if isinstance(e, BrokenProcessPool) else "worker raised"
    return NormalizeOutcome(src.key, str(src.path), "failed", reason=f"{what}: {type(e).__name__}: {e}"[:300])


def _run_pool(todo: Sequence[SourceFile], store: Path, workers: int, threads: int, work: Work,
              record: Callable[[SourceFile, NormalizeOutcome], None]) -> None:
    """Run ``work`` on every source in ``workers`` processes; every source gets exactly one outcome.

    At most ``workers`` sources are in flight, so when a worker dies (a decoder crash, the OOM
    killer) and breaks the pool, only those are suspects: each is retried alone in a fresh
    process (a second death is its failure) and the others go on in a new pool.
    """
    pending = deque(todo)
    while pending:
        suspects: list[SourceFile] = []
        with process_pool(workers, drop_secret_variables) as pool:
            inflight: dict[Future[NormalizeOutcome], SourceFile] = {}
            while (pending or inflight) and not suspects:
                broken = False
                while pending and len(inflight) < workers:
                    src = pending.popleft()
                    try:
                        inflight[pool.submit(work, src, store, threads)] = src
                    except BrokenProcessPool:  # a worker died since the last wait: this one never ran
                        pending.appendleft(src)
                        broken = True
                        break
                if broken and not inflight:
                    break  # a new pool takes the rest
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    src = inflight.pop(fut)
                    try:
                        record(src, fut.result())
                    except BrokenProcessPool:
                        suspects.append(src)
                    except Exception as e:  # the work function itself raised in the worker
                        record(src, _died(src, e))
            suspects.extend(inflight.values())
        for src in suspects:
            with process_pool(1, drop_secret_variables) as alone:
                try:
                    record(src, alone.submit(work, src, store, threads).result())
                except Exception as e:
                    record(src, _died(src, e))


def normalize_videos(sources: Sequence[Path], store: Path, workers: int = 1, keys: Sequence[str] | None = None,
                     progress: bool = False, work: Work | None = None) -> NormalizeReport:
    """Normalize every source video into ``store`` (module doc); a bad file never stops the run.

    ``workers`` processes share the machine's cores (each decodes with ``cores // workers``
    threads); ``progress`` shows a tqdm bar on stderr. ``work`` replaces :func:`normalize_one`
    (a module-level function, so that worker processes can import it): tests inject failures.
    """
    store = Path(store)
    (store / NORMALIZED).mkdir(parents=True, exist_ok=True)
    # Two runs on one store each transcoded every source and each appended its index rows (one key,
    # two rows): one writer at a time, the kernel dropping a killed one's lease.
    lease = try_lease(store / INDEX_FILE)
    if lease is None:
        who = holder(store / INDEX_FILE)
        raise StoreBusy(f"{store}: another `benchcheck videos normalize` is writing this store"
                        f"{f' ({who})' if who else ''}; wait for it to end, then run the same command again")
    with lease:
        return _normalize(sources, store, workers, keys, progress, work or normalize_one)


class StoreBusy(ValueError):
    """Another live process normalizes into the same store."""


def _normalize(sources: Sequence[Path], store: Path, workers: int, keys: Sequence[str] | None, progress: bool,
               work: Work) -> NormalizeReport:
    from tqdm import tqdm

    clear_stale(store / NORMALIZED)
    report = NormalizeReport(store)
    done = done_rows(store / INDEX_FILE)
    failures = last_failures(store / FAILURES_FILE)
    todo = []
    clashes: list[tuple[SourceFile, SourceFile]] = []
    found = collect_sources(sources, keys, clashes, store)
    # Dropped without a word, a clip of the second folder was missing from the store and the run
    # still said every source was handled. Not a failures.jsonl row: that file is keyed by the key,
    # which the kept file's success would mark stored.
    for src, kept in clashes:
        report.outcomes.append(
            _key_clash(src, str(kept.path), "also {}'s in this run (source folders of the same name)"))
    for src in found:
        if _is_done(src, done.get(src.key), store):
            o = NormalizeOutcome(src.key, str(src.path), "skipped", str(done[src.key]["content_hash"]))
            report.outcomes.append(o)
            _clear_failure(store, failures, o)
        elif (other := _stored_for_another(src, done.get(src.key))) is not None:
            # Normalized, its row became the key's last and took the key from the file an earlier
            # run stored under it: items naming the key silently showed another video.
            report.outcomes.append(_key_clash(
                src, other, "already {}'s in this store (an earlier run; source folders of the same name)"))
        else:
            todo.append(src)
    threads = max(1, (os.cpu_count() or 1) // max(1, workers))
    bar = tqdm(total=len(todo), desc="normalize", unit="video", file=sys.stderr, disable=not progress)

    def record(src: SourceFile, o: NormalizeOutcome) -> None:
        report.outcomes.append(o)
        if o.status in ("done", "exists"):
            append_index(store / INDEX_FILE, [_index_row(o, _stat(src.path))])
            _clear_failure(store, failures, o)
        else:
            stat = _stat(src.path)
            row = {"key": o.key, "source": o.path, "reason": o.reason,
                   "source_size": stat[0] if stat else None, "source_mtime_ns": stat[1] if stat else None}
            prev = failures.get(o.key)
            if prev is None or any(prev.get(k) != v for k, v in row.items()):
                append_index(store / FAILURES_FILE, [{**row, "time": _now()}])
                failures[o.key] = row
        bar.update(1)

    try:
        if workers <= 1:
            for src in todo:
                try:
                    outcome = work(src, store, threads)
                except Exception as e:  # normalize_one never raises; an injected or future one might
                    outcome = _died(src, e)
                record(src, outcome)
        else:
            _run_pool(todo, store, workers, threads, work, record)
    finally:
        bar.close()
    return report
