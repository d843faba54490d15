"""``data fetch``: download a run package from the Hugging Face Hub, verify, extract, count.

Files come through ``huggingface_hub.hf_hub_download`` into ``OUT/<kind>_tar`` (a local-dir
download: a file already there at this commit is not fetched again, and a connection dropped
mid-file resumes with a Range request within the same process). Each shard is hashed against
the manifest, then extracted with :func:`safe_extract`; downloads run ``workers`` at a time, at
most that many ahead of the extraction, so ``--delete-shards`` bounds the disk used by tar
files. One fetch at a time may run in an OUT folder (an exclusive lock); orphaned partial
downloads of a killed run are removed (the client never resumes from them).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from benchcheck.data.layout import (
    SHARDS_DIR,
    STATE_DIR,
    TARGET_DIR,
    FetchRecord,
    is_extracted,
    read_extracted,
    write_record,
)
from benchcheck.data.manifest import (
    KINDS,
    ShardEntry,
    ShardKind,
    load_manifest,
    manifest_name,
    sha256_file,
)
from benchcheck.data.verify import ShardsReport, ShardVerdict, check_count, unpack_shard

FetchKind = Literal["frames", "videos", "items"]


class FetchError(RuntimeError):
    """A precondition failed (repository, revision or manifest unusable, another fetch running)."""


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """What to fetch and where. ``endpoint`` defaults to ``$HF_ENDPOINT`` read at call time."""

    repo: str
    kind: FetchKind
    out: Path
    revision: str = "main"
    target: Path | None = None
    delete_shards: bool = False
    workers: int = 4
    endpoint: str | None = None


@dataclass(slots=True)
class ItemsReport:
    """``--kind items``: the files fetched and those whose LFS sha256 did not match."""

    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def good(self) -> bool:
        return not self.problems


def redact(text: str) -> str:
    """Remove the configured Hub token and secret-shaped text (the ``user:password@`` of an
    ``HF_ENDPOINT`` URL the Hub client quotes) from a message: errors must never carry them."""
    from huggingface_hub import get_token

    from benchcheck.masking import MASK
    from benchcheck.masking import redact as redact_patterns

    token = get_token()
    return redact_patterns(text.replace(token, MASK) if token else text)


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    lock = out / STATE_DIR / "fetch.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            raise FetchError(f"{out}: another fetch is running in this folder") from e
        yield
    finally:
        os.close(fd)


def _remove_orphans(local_dir: Path) -> None:
    """Remove the partial downloads a killed fetch left: dead weight, up to a shard each.

    huggingface_hub 1.33 (``file_download._download_to_tmp_and_move``) writes to
    ``<hash>.<etag>.<uuid8>.incomplete``, opened with ``"wb"`` and unique to the process; it
    resumes with a Range request only within that process and never reopens such a file. The
    fetch lock means no other fetch of this folder is writing one now.
    """
    cache = local_dir / ".cache" / "huggingface" / "download"
    if cache.is_dir():
        for p in cache.rglob("*.incomplete"):
            p.unlink(missing_ok=True)


class _Hub:
    """The few Hub calls a fetch makes, bound to one repository, endpoint and commit."""

    def __init__(self, repo: str, endpoint: str | None) -> None:
        from huggingface_hub import HfApi

        self.repo = repo
        self.endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
        self.api = HfApi(endpoint=self.endpoint)
        self.commit = ""

    def resolve(self, revision: str) -> str:
        """Pin the revision to a commit, so every file comes from the same one."""
        try:
            info = self.api.dataset_info(self.repo, revision=revision)
        except Exception as e:  # HTTP, network or offline errors all end the fetch the same way
            raise FetchError(redact(f"dataset {self.repo}@{revision}: {e}").splitlines()[0]) from e
        if not info.sha:
            raise FetchError(f"dataset {self.repo}@{revision}: the Hub gave no commit")
        self.commit = str(info.sha)
        return self.commit

    def files(self) -> dict[str, Any]:
        """Every file of the repository at the commit: path → RepoFile."""
        from huggingface_hub.hf_api import RepoFile

        try:
            tree = list(self.api.list_repo_tree(self.repo, recursive=True, revision=self.commit,
                                                repo_type="dataset"))
        except Exception as e:
            raise FetchError(redact(f"dataset {self.repo}: listing files failed: {e}").splitlines()[0]) from e
        return {f.path: f for f in tree if isinstance(f, RepoFile)}

    def download(self, path: str, local_dir: Path) -> Path:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(self.repo, path, repo_type="dataset", revision=self.commit,
                                    local_dir=local_dir, endpoint=self.endpoint))


def _find_manifest(files: dict[str, Any], kind: ShardKind, repo: str) -> str:
    name = manifest_name(kind)
    found = sorted(p for p in files if PurePosixPath(p).name == name)
    if not found:
        raise FetchError(f"dataset {repo}: no {name} in the repository")
    if len(found) > 1:
        raise FetchError(f"dataset {repo}: several {name} ({', '.join(found)}); fetch one package per repository")
    return found[0]


def _repo_path(prefix: PurePosixPath, file: str) -> str:
    """A shard's path in the repository: manifest entries are relative to the manifest's folder."""
    return file if str(prefix) == "." else str(prefix / file)


def fetch_shards(opts: FetchOptions, on_verdict: Callable[[ShardVerdict], None] | None = None,
                 on_bytes: Callable[[int], None] | None = None) -> ShardsReport:
    """Fetch, verify and extract the shards of ``opts.kind``; a rerun does only what is missing."""
    if opts.kind == "items":
        raise ValueError("fetch_shards handles frames and videos; use fetch_items for items")
    kind: ShardKind = opts.kind
    out = opts.out.resolve()
    local_dir = out / SHARDS_DIR[kind]
    target = (opts.target or out / TARGET_DIR[kind]).resolve()
    with _exclusive(out):
        _remove_orphans(local_dir)
        hub = _Hub(opts.repo, opts.endpoint)
        commit = hub.resolve(opts.revision)
        files = hub.files()
        mpath_repo = _find_manifest(files, kind, opts.repo)
        try:
            mpath = hub.download(mpath_repo, local_dir)
        except Exception as e:
            raise FetchError(redact(f"{mpath_repo}: download failed: {e}").splitlines()[0]) from e
        manifest = load_manifest(mpath)
        write_record(out, FetchRecord(kind, opts.repo, opts.revision, commit, str(mpath), str(target)))
        report = ShardsReport(kind)
        prefix = PurePosixPath(mpath_repo).parent

        def emit(v: ShardVerdict) -> None:
            report.verdicts.append(v)
            if on_verdict is not None:
                on_verdict(v)

        logged = read_extracted(out, kind)
        todo: list[ShardEntry] = []
        for entry in manifest.shards:
            repo_path = _repo_path(prefix, entry.file)
            row = logged.get(entry.file)
            if row is not None and is_extracted(row, entry.sha256, target, out):
                if opts.delete_shards:
                    (mpath.parent / entry.file).unlink(missing_ok=True)
                emit(_already_extracted(entry.file, row))
            elif repo_path not in files:
                emit(ShardVerdict(entry.file, "missing", f"listed in the manifest, not in {opts.repo}@{commit[:12]}"))
            else:
                todo.append(entry)
        _download_and_unpack(hub, todo, prefix, local_dir, target, out, kind, opts, emit, on_bytes)
        report.verdicts.sort(key=lambda v: v.file)
        report.count = check_count(target, manifest, kind)
        return report


def _already_extracted(file: str, row: dict[str, Any]) -> ShardVerdict:
    """The verdict of a shard an earlier fetch extracted: still ``refused`` when members were
    refused then (as ``data verify`` says), so a rerun does not turn a flagged shard into OK."""
    refused = row.get("refused")
    if isinstance(refused, list) and refused:
        shown = "; ".join(str(r) for r in refused[:5])
        more = f"; and {len(refused) - 5} more" if len(refused) > 5 else ""
        return ShardVerdict(file, "refused", f"already extracted; {len(refused)} refused members: {shown}{more}")
    return ShardVerdict(file, "extracted", "already extracted")


def _download_and_unpack(hub: _Hub, todo: list[ShardEntry], prefix: PurePosixPath, local_dir: Path,
                         target: Path, out: Path, kind: ShardKind, opts: FetchOptions,
                         emit: Callable[[ShardVerdict], None], on_bytes: Callable[[int], None] | None) -> None:
    """Download up to ``workers`` shards ahead of the (sequential) verification and extraction."""
    queue = list(reversed(todo))
    workers = max(1, opts.workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict[Future[Path], ShardEntry] = {}

        def submit() -> None:
            while queue and len(running) < workers:
                e = queue.pop()
                running[pool.submit(hub.download, _repo_path(prefix, e.file), local_dir)] = e

        submit()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                entry = running.pop(fut)
                try:
                    path = fut.result()
                except Exception as exc:
                    msg = redact(f"download failed: {type(exc).__name__}: {exc}").splitlines()[0]
                    emit(ShardVerdict(entry.file, "failed", msg))
                    continue
                emit(unpack_shard(path, entry, target, out, kind,
                                  delete_bad=True, delete_after=opts.delete_shards, on_bytes=on_bytes))
            submit()


def fetch_items(opts: FetchOptions, on_file: Callable[[str], None] | None = None) -> ItemsReport:
    """Fetch every file of the repository except the tar shards into ``OUT``.

    LFS files are checked against the sha256 the Hub lists for them.
    """
    out = opts.out.resolve()
    report = ItemsReport()
    with _exclusive(out):
        hub = _Hub(opts.repo, opts.endpoint)
        hub.resolve(opts.revision)
        files = hub.files()
        shard_names = tuple(f"{k}_" for k in KINDS)
        for path in sorted(files):
            name = PurePosixPath(path).name
            if name.endswith(".tar") and name.startswith(shard_names):
                continue
            try:
                local = hub.download(path, out)
            except Exception as exc:
                report.problems.append(redact(f"{path}: download failed: {type(exc).__name__}: {exc}").splitlines()[0])
                continue
            lfs = getattr(files[path], "lfs", None)
            if lfs is not None and sha256_file(local) != lfs.sha256:
                report.problems.append(f"{path}: SHA256 MISMATCH against the Hub's LFS sha256")
                local.unlink(missing_ok=True)
                continue
            report.files.append(path)
            if on_file is not None:
                on_file(path)
    return report
