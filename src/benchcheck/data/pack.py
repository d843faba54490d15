"""``pack``: the results tarball, its ``sha256sum`` file and the report; optional Hub upload.

The tarball holds the result files a run produced (pool: ``step*/`` and ``run_log.jsonl``;
sweep: ``conditions_results.csv``, ``p1_raw/`` and ``run_log.jsonl``), the log folders and the
report, under the paths they have relative to the current folder (``results/pool/step1/...``,
``logs/...``, as the seeds' ``tar -czf`` writes them). Text files of the log folders (``.txt``,
``.log``, ``.jsonl``, ``.json``, ``.out``, ``.err``, ``.sh``) go in masked as the report is
(``--api-key``, ``HF_TOKEN=``, ``hf_…``, Bearer headers), and so does every value of a
secret-looking environment variable (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``) and the
configured Hub token. The tarball is hashed while it is written, goes through ``.partial`` and
a rename, and its ``.sha256`` is written last: a kill leaves either no tarball or a complete one
with its checksum.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import socket
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from benchcheck.data.launch import env_secrets, mask, mask_json, mask_values
from benchcheck.data.manifest import safe_relative
from benchcheck.data.report import RUN_LOG, SWEEP_CSV, ReturnsReport, build_report, results_kind, to_markdown

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UploadError(RuntimeError):
    """The upload did not happen; the files are left ready to send."""


@dataclass(frozen=True, slots=True)
class PackOptions:
    """What to pack. ``host``/``date`` default to this machine's name and today (local time)."""

    results: Path
    logs: tuple[Path, ...] = ()
    out: Path | None = None
    host: str | None = None
    date: str | None = None
    launcher_note: str = ""


@dataclass(frozen=True, slots=True)
class PackResult:
    """The files written and the tarball's sha256."""

    tarball: Path
    sha256_file: Path
    sha256: str
    report_json: Path
    report_md: Path
    report: ReturnsReport

    @property
    def files(self) -> list[Path]:
        return [self.tarball, self.sha256_file, self.report_json, self.report_md]


def default_name(results: Path, host: str, date: str) -> str:
    """``pool_returns_<host>_<date>.tar.gz``, or ``fp_returns_…`` for a sweep results folder."""
    prefix = "fp" if results_kind(results) == "sweep" else "pool"
    return f"{prefix}_returns_{_UNSAFE.sub('-', host)}_{date}.tar.gz"


def stem(name: str) -> str:
    return name[: -len(".tar.gz")] if name.endswith(".tar.gz") else name.rsplit(".", 1)[0]


def arcname(path: Path) -> str:
    """The path relative to the current folder when inside it, else the folder's own name."""
    p = path.resolve()
    try:
        rel = p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.name
    return rel if rel != "." else p.name


def result_members(results: Path) -> list[Path]:
    """The files and folders of a results folder that go back (not the copied item inputs)."""
    if results_kind(results) == "sweep":
        names = [SWEEP_CSV, "p1_raw", RUN_LOG]
        return [results / n for n in names if (results / n).exists()]
    steps = sorted(p for p in results.iterdir() if p.is_dir() and re.fullmatch(r"step\d+", p.name))
    return [*steps, *([results / RUN_LOG] if (results / RUN_LOG).is_file() else [])]


class _HashingFile:
    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


def _clean(ti: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Regular files and folders only, owned by nobody in particular."""
    if not (ti.isreg() or ti.isdir()):
        return None
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


# Text files of the log folders are masked on their way into the tarball (launch lines, vLLM and
# client logs can carry --api-key values, HF_TOKEN=..., Bearer headers); other files go as they are.
TEXT_SUFFIXES = frozenset({".txt", ".log", ".jsonl", ".json", ".out", ".err", ".sh"})


def secrets_to_mask() -> list[str]:
    """Secret-looking environment values and the configured Hub token, longest first."""
    from huggingface_hub import get_token

    found = env_secrets()
    token = (get_token() or "").strip()
    if len(token) >= 8 and token not in found:
        found.append(token)
    return sorted(found, key=lambda v: (-len(v), v))


_JSON_WHOLE_MAX = 64 << 20  # a .json log larger than this is masked as text, line by line


def _mask_json_text(text: str, secrets: list[str]) -> str | None:
    """``text`` masked string by string when it is JSON (unchanged when nothing is secret), else None."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    masked = mask_json(obj, secrets)
    if masked == obj:
        return text
    return json.dumps(masked, ensure_ascii=False) + ("\n" if text.endswith("\n") else "")


def _write_masked(path: Path, dst: IO[bytes], secrets: list[str]) -> int:
    """Write ``path`` masked into ``dst``; return the number of bytes written.

    Streamed line by line (a ``.jsonl`` line, or a whole ``.json`` file, masked value by value so
    it stays valid JSON); bytes that are not UTF-8 pass through unchanged.
    """
    def enc(text: str) -> bytes:
        return text.encode("utf-8", "surrogateescape")

    suffix = path.suffix.lower()
    if suffix == ".json" and path.stat().st_size <= _JSON_WHOLE_MAX:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        whole = _mask_json_text(text, secrets)
        return dst.write(enc(whole if whole is not None else mask(text, secrets)))
    n = 0
    with path.open("rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "surrogateescape")
            masked = _mask_json_text(line, secrets) if suffix == ".jsonl" else None
            n += dst.write(enc(masked if masked is not None else mask(line, secrets)))
    return n


def _add_logs(tf: tarfile.TarFile, path: Path, arc: str, secrets: list[str]) -> None:
    """Add a log folder as ``tf.add`` would (sorted, links and specials left out), text files masked."""
    ti = _clean(tf.gettarinfo(str(path), arcname=arc))
    if ti is None:
        return
    if ti.isdir():
        tf.addfile(ti)
        for name in sorted(os.listdir(path)):
            _add_logs(tf, path / name, f"{arc}/{name}", secrets)
        return
    if path.suffix.lower() in TEXT_SUFFIXES:
        with tempfile.SpooledTemporaryFile(max_size=16 << 20) as src:
            ti.size = _write_masked(path, src, secrets)
            src.seek(0)
            tf.addfile(ti, src)
        return
    with path.open("rb") as f:
        tf.addfile(ti, f)


def _bytes_member(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = int(dt.datetime.now(dt.UTC).timestamp())
    ti.mode = 0o644
    tf.addfile(ti, io.BytesIO(data))


def pack(opts: PackOptions) -> PackResult:
    """Write the tarball, its ``.sha256`` and the report (JSON and Markdown) next to it."""
    results = opts.results
    if not results.is_dir():
        raise ValueError(f"{results}: results folder not found")
    for d in opts.logs:
        if not d.is_dir():
            raise ValueError(f"{d}: logs folder not found")
    host = opts.host or socket.gethostname()
    date = opts.date or dt.date.today().strftime("%Y%m%d")
    out = opts.out or Path(default_name(results, host, date))
    if not out.name.endswith(".tar.gz"):
        raise ValueError(f"{out}: the tarball name must end with .tar.gz")
    out.parent.mkdir(parents=True, exist_ok=True)
    base = stem(out.name)
    tmp = out.with_name(out.name + ".partial")
    secrets = secrets_to_mask()
    # The report (JSON parsing) is built in a thread while the results are compressed (zlib
    # releases the GIL), then goes into the tarball as its last members.
    with ThreadPoolExecutor(max_workers=1) as ex:
        pending = ex.submit(build_report, results, list(opts.logs), host, date, out.name, opts.launcher_note)
        with tmp.open("wb") as raw:
            hf = _HashingFile(raw)
            # gzip level 6, as `tar -czf`: level 9 (tarfile's default) costs ~2x the time for ~1% less size.
            with tarfile.open(fileobj=hf, mode="w:gz", compresslevel=6) as tf:  # type: ignore[call-overload]
                res_arc = arcname(results)
                for m in result_members(results):
                    tf.add(m, arcname=f"{res_arc}/{m.relative_to(results).as_posix()}", filter=_clean)
                for d in opts.logs:
                    _add_logs(tf, d, arcname(d), secrets)
                report = pending.result()
                # The report's launch lines are redacted already; the known secret values go too
                # (string by string in the JSON, so it stays valid JSON).
                masked = mask_json(json.loads(json.dumps(report.to_json())), secrets)
                report_json = json.dumps(masked, indent=1, ensure_ascii=False).encode() + b"\n"
                report_md = mask_values(to_markdown(report), secrets).encode()
                _bytes_member(tf, f"{base}.report.json", report_json)
                _bytes_member(tf, f"{base}.report.md", report_md)
            raw.flush()
            os.fsync(raw.fileno())
    digest = hf.hash.hexdigest()
    rj, rm = out.with_name(f"{base}.report.json"), out.with_name(f"{base}.report.md")
    _write_atomic(rj, report_json)
    _write_atomic(rm, report_md)
    os.replace(tmp, out)
    sha_file = out.with_name(f"{base}.sha256")
    _write_atomic(sha_file, f"{digest}  {out.name}\n".encode())
    return PackResult(out, sha_file, digest, rj, rm, report)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def repo_paths(path_in_repo: str, tarball: str) -> tuple[str, str]:
    """Where the tarball goes in the repository and the folder-and-stem its companions share.

    ``returns/`` (a folder) → ``returns/<tarball>``; ``returns/x.tar.gz`` → that exact path.
    """
    p = path_in_repo.strip().strip("/")
    if not p or not safe_relative(p):
        raise ValueError(f"--path-in-repo {path_in_repo!r} is not a safe relative path")
    tar_path = p if p.endswith(".tar.gz") else f"{p}/{tarball}"
    return tar_path, stem(tar_path)


def upload(result: PackResult, repo: str, path_in_repo: str = "returns", endpoint: str | None = None) -> str:
    """Upload the tarball, its ``.sha256`` and the report in one commit; return the commit URL.

    Raises :class:`UploadError` when no token is configured or the Hub refuses; the local files
    stay as they are. The token is read by ``huggingface_hub`` and never printed.
    """
    from huggingface_hub import CommitOperationAdd, HfApi, get_token

    token = get_token()
    if not token:
        raise UploadError("no Hugging Face token is configured (set HF_TOKEN or run `hf auth login`); "
                          "nothing was uploaded")
    tar_path, base = repo_paths(path_in_repo, result.tarball.name)
    ops = [CommitOperationAdd(path_in_repo=tar_path, path_or_fileobj=str(result.tarball)),
           CommitOperationAdd(path_in_repo=f"{base}.sha256", path_or_fileobj=str(result.sha256_file)),
           CommitOperationAdd(path_in_repo=f"{base}.report.json", path_or_fileobj=str(result.report_json)),
           CommitOperationAdd(path_in_repo=f"{base}.report.md", path_or_fileobj=str(result.report_md))]
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)
    try:
        info = api.create_commit(repo, ops, repo_type="dataset", commit_message=f"returns: {result.tarball.name}")
    except Exception as e:
        msg = f"upload to {repo} failed: {type(e).__name__}: {e}".replace(token, "***")
        raise UploadError(msg.splitlines()[0]) from e
    return str(info.commit_url)
