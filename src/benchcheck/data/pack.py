"""``pack``: the results tarball, its ``sha256sum`` file and the report; optional Hub upload.

The tarball holds the result files a run produced (pool: ``step*/``, ``run_log.jsonl`` and the
assembled outputs; sweep: ``conditions_results.csv``, ``p1_raw/``, ``run_log.jsonl`` and the
analysis, from the ``--out`` folder ``sweep analyze`` recorded), the log folders and the report,
under the paths they have relative to the current folder (``results/pool/step1/...``,
``logs/...``, as the seeds' ``tar -czf`` writes them).

Result files are data, not logs: they go in as they are. Every file of the log folders is a log:
text (decided by content, any encoding with a BOM, UTF-16, inside gzip/bzip2/xz too) goes in
masked by :mod:`benchcheck.data.pack_logs`, and a file that cannot be checked is left out and
listed in the report (``include_unchecked`` packs it as it is). The tarball is hashed while it
is written, goes through ``.partial`` and a rename, and its ``.sha256`` is written last: a kill
leaves either no tarball or a complete one with its checksum, and a pack stopped by an error
removes its ``.partial``. One ``pack`` writes a tarball name
at a time (the lease of ``--out``): a second one on the same name stops before it writes.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import re
import socket
import tarfile
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from benchcheck.atomic import write_bytes_atomic
from benchcheck.data.manifest import safe_relative
from benchcheck.data.pack_logs import Unchecked, mask_stream
from benchcheck.data.report import RUN_LOG, SWEEP_CSV, ReturnsReport, build_report, results_kind, to_markdown
from benchcheck.errors import naming
from benchcheck.filehash import sha256_file
from benchcheck.lease import holder, try_lease
from benchcheck.masking import Masker

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
    include_unchecked: bool = False


@dataclass(frozen=True, slots=True)
class PackResult:
    """The files written and the tarball's sha256."""

    tarball: Path
    sha256_file: Path
    sha256: str
    report_json: Path
    report_md: Path
    report: ReturnsReport
    unchecked: tuple[str, ...] = ()

    @property
    def files(self) -> list[Path]:
        return [self.tarball, self.sha256_file, self.report_json, self.report_md]


def default_name(results: Path, host: str, date: str) -> str:
    """``pool_returns_<host>_<date>.tar.gz``, or ``fp_returns_…`` for a sweep results folder."""
    prefix = "fp" if results_kind(results) == "sweep" else "pool"
    return f"{prefix}_returns_{_UNSAFE.sub('-', host)}_{date}.tar.gz"


def checksum_name(tarball: str) -> str:
    """The local ``sha256sum`` file: ``pool_returns.sha256`` / ``fp_returns.sha256`` for the seeds'
    tarball names, as their ``sha256sum … > pool_returns.sha256`` and upload commands expect (the
    upload keeps the dated name); ``<stem>.sha256`` for any other name."""
    for prefix in ("pool_returns", "fp_returns"):
        if tarball.startswith(prefix + "_"):
            return f"{prefix}.sha256"
    return f"{stem(tarball)}.sha256"


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


# What ``assemble`` writes beside the step folders (pool.duckdb is left out: it is rebuilt from
# pool_items.parquet in seconds and is the largest of them).
POOL_ASSEMBLED = ("pool_items.parquet", "pool_summary.md", "pool_summary.csv", "run_accounting.csv")


def _sweep_analysis(results: Path) -> list[Path]:
    """The sweep's analysis outputs: an ``analysis/`` folder and ``*analysis*`` files beside the CSV."""
    found = [p for p in results.iterdir() if "analysis" in p.name.lower() and (p.is_file() or p.is_dir())]
    return sorted(found)


@dataclass(frozen=True, slots=True)
class SweepAnalysis:
    """The outputs of the last ``sweep analyze`` of a results folder: where they are, and how pack knew."""

    folder: Path
    files: tuple[Path, ...]
    found_by: str


def _analysis_outputs(folder: Path) -> tuple[Path, ...]:
    """What ``sweep analyze`` writes into its ``--out`` (``sweep.report.write_analysis``: the summary
    CSV and Markdown; ``sweep.plots.write_plots``: ``sweep_*.png``), and nothing else of that folder:
    ``--out`` may be a folder that holds other things (the project, the results themselves)."""
    if not folder.is_dir():
        return ()
    names = {"sweep_summary.csv", "sweep_summary.md"}
    return tuple(sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                        and (p.name in names or (p.name.startswith("sweep_") and p.suffix == ".png"))))


def _recorded_out(results: Path) -> Path | None:
    """The ``--out`` the last ``sweep analyze`` of ``results`` recorded in its settings file (absolute);
    None for a settings file written before it recorded one, or none at all."""
    from benchcheck.sweep.report import SETTINGS_NAME

    try:
        out = json.loads((results / SETTINGS_NAME).read_text(encoding="utf-8")).get("out")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(out) if isinstance(out, str) and out else None


def find_sweep_analysis(results: Path) -> tuple[SweepAnalysis | None, str]:
    """The sweep analysis to pack with ``results``, and one line saying where it came from (or why none).

    First the folder the last ``sweep analyze`` recorded; else, for a settings file that recorded
    none (an older benchcheck) or a project moved since, the layouts the docs and ``init`` print:
    ``--out`` beside the results folder (``sweep/analysis`` for ``sweep/results``), an ``analysis/``
    inside it, or the results folder itself."""
    from benchcheck.sweep.report import SETTINGS_NAME

    settings = results / SETTINGS_NAME
    recorded = _recorded_out(results)
    if recorded is not None and (files := _analysis_outputs(recorded)):
        return SweepAnalysis(recorded, files, f"the folder {settings} records"), ""
    for folder in (results.parent / "analysis", results / "analysis", results):
        if files := _analysis_outputs(folder):
            why = (f"{settings} records {recorded}, which holds none now; found beside the results instead"
                   if recorded is not None else "beside the results (no folder recorded)")
            return SweepAnalysis(folder, files, why), ""
    where = f"in {recorded} (which {settings} records)" if recorded is not None else f"beside {results}"
    return None, (f"no sweep analysis found {where}: the pack holds the rows, not the summary or plots; "
                  f"run `benchcheck sweep analyze --results {results} --out DIR` and pack again to include it")


def result_members(results: Path) -> list[Path]:
    """The files and folders of a results folder that go back (not the copied item inputs)."""
    if results_kind(results) == "sweep":
        # sweep_rows/: the typed rows the CSV is written from (their hashes judge staleness)
        names = [SWEEP_CSV, "sweep_rows", "p1_raw", RUN_LOG]
        return [results / n for n in names if (results / n).exists()] + _sweep_analysis(results)
    steps = sorted(p for p in results.iterdir() if p.is_dir() and re.fullmatch(r"step\d+", p.name))
    files = [results / n for n in (RUN_LOG, *POOL_ASSEMBLED) if (results / n).is_file()]
    return [*steps, *files]


@dataclass(frozen=True, slots=True)
class _Member:
    """One result file or folder as it goes in: its name in the tarball and the real path read."""

    arc: str
    real: Path
    is_dir: bool


def _walk_results(path: Path, arc: str, root: Path, parents: tuple[Path, ...] = ()) -> Iterator[_Member]:
    """The files under a result member, hidden names left out (the unit leases, the temporary files
    of a writer killed mid-write), symlinks followed while they stay inside ``root`` (the
    results folder, resolved). A link out of it, a dangling link or a loop raises ValueError naming
    the link: a result left out silently would make the report count rows the tarball lacks."""
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.exists():
            raise ValueError(f"{path}: a symlink to {os.readlink(path)}, which does not exist; "
                             "remove it or restore its target, then pack again")
        if not target.is_relative_to(root):
            raise ValueError(f"{path}: a symlink out of the results folder (to {target}); pack follows "
                             f"links only inside {root}: copy the files in (cp -rL) and pack again")
    real = Path(os.path.realpath(path))
    if real.is_dir():
        if real in parents:
            raise ValueError(f"{path}: a symlink loop (it leads back to {real}); remove it and pack again")
        yield _Member(arc, real, True)
        for name in sorted(os.listdir(real)):
            if name.startswith("."):  # .leases/ and a killed writer's .NAME.*.tmp: not results
                continue
            yield from _walk_results(path / name, f"{arc}/{name}", root, (*parents, real))
    elif real.is_file():
        yield _Member(arc, real, False)


def _result_files(results: Path, analysis: SweepAnalysis | None = None) -> list[_Member]:
    """Every result file and folder that goes in, links resolved: checked before anything is written.
    The analysis goes in under its own path (``sweep/analysis/…`` beside ``sweep/results/…``), each
    file once where it is inside the results folder too."""
    root, res_arc = Path(os.path.realpath(results)), arcname(results)
    members = [m for top in result_members(results)
               for m in _walk_results(top, f"{res_arc}/{top.relative_to(results).as_posix()}", root)]
    if analysis is None:
        return members
    arc = _analysis_arc(analysis.folder, results, res_arc)
    have = {m.real for m in members}
    folder_root = Path(os.path.realpath(analysis.folder))
    extra = [m for f in analysis.files for m in _walk_results(f, f"{arc}/{f.name}", folder_root) if m.real not in have]
    return members + extra


def _analysis_arc(folder: Path, results: Path, res_arc: str) -> str:
    """The analysis folder's path in the tarball: under the results' own when inside them, else its
    path from the current folder (its name when outside it), never one the results already use."""
    real, res_real = Path(os.path.realpath(folder)), Path(os.path.realpath(results))
    if real.is_relative_to(res_real):
        rel = real.relative_to(res_real).as_posix()
        return res_arc if rel == "." else f"{res_arc}/{rel}"
    arc = arcname(folder)
    return f"{res_arc}_analysis" if arc == res_arc or res_arc.startswith(arc + "/") else arc


# What a result file that changed under ``pack`` is told: a run still writing the folder.
_CHANGED = "pack again once no run writes the results folder"


def _add_member(tf: tarfile.TarFile, m: _Member) -> None:
    """A regular file or folder entry built from the real path's stat (never a link entry: two links
    to one file are two copies, not a hard link that ``_clean`` would drop). A read error names the
    file; so does a file removed or cut short since it was listed (a run still writing)."""
    try:
        with naming(m.real):
            st = m.real.stat()
            ti = tarfile.TarInfo(m.arc)
            ti.type = tarfile.DIRTYPE if m.is_dir else tarfile.REGTYPE
            ti.mode, ti.mtime, ti.size = st.st_mode & 0o7777, int(st.st_mtime), 0 if m.is_dir else st.st_size
            if m.is_dir:
                tf.addfile(ti)
                return
            with m.real.open("rb") as f:
                tf.addfile(ti, f)
    except OSError as e:
        if e.filename != str(m.real):
            raise  # the tarball's own write (a full disk): it names the tarball
        if isinstance(e, FileNotFoundError):
            raise OSError(errno.ENOENT, f"removed since pack listed it; {_CHANGED}", str(m.real)) from e
        if e.errno is None:  # tarfile: fewer bytes to read than the stat said
            raise OSError(None, f"shorter than when pack listed it; {_CHANGED}", str(m.real)) from e
        raise


class _HashingFile:
    """The tarball's stream, hashed as it is written; a write error (a full disk) names ``name``,
    the tarball asked for (its ``.partial`` is removed)."""

    def __init__(self, f: BinaryIO, name: Path) -> None:
        self._f = f
        self.name = name
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        with naming(self.name):
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


def secrets_to_mask() -> Masker:
    """The masker of the tarball and the report: secret-named environment values, the configured
    Hub token, and the secret-shaped patterns (:mod:`benchcheck.masking`)."""
    from huggingface_hub import get_token

    return Masker.from_env(extra=[(get_token() or "").strip()])


@dataclass(slots=True)
class _LogsTally:
    """The log files that could not be checked for secrets (left out, or packed as asked)."""

    include_unchecked: bool
    unchecked: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # left out: links out of the folder, specials


def _add_logs(tf: tarfile.TarFile, path: Path, arc: str, masker: Masker, tally: _LogsTally, root: Path,
              parents: tuple[Path, ...] = ()) -> None:
    """Add a log folder sorted, every file masked (:mod:`benchcheck.data.pack_logs`); one that
    cannot be checked is listed in ``tally`` and left out unless ``include_unchecked``. Symlinks are
    followed while they stay inside ``root`` (the log folder given, resolved, so ``--logs logs``
    where ``logs`` is a link to other storage packs what it holds); a link out of it, a dangling
    link, a loop and special files are left out and listed."""
    real = Path(os.path.realpath(path))
    if path.is_symlink() and not (real.exists() and real.is_relative_to(root)):
        why = "dangling" if not real.exists() else f"to {real}, outside the log folder"
        tally.links.append(f"{arc} (a symlink {why})")
        return
    if real.is_dir():
        if real in parents:
            tally.links.append(f"{arc} (a symlink loop back to {real})")
            return
        ti = _clean(tf.gettarinfo(str(real), arcname=arc))
        if ti is None:
            return
        tf.addfile(ti)
        for name in sorted(os.listdir(real)):
            _add_logs(tf, path / name, f"{arc}/{name}", masker, tally, root, (*parents, real))
        return
    ti = _clean(tf.gettarinfo(str(real), arcname=arc))
    if ti is None:
        tally.links.append(f"{arc} (not a regular file)")
        return
    with naming(real), real.open("rb") as f, tempfile.SpooledTemporaryFile(max_size=16 << 20) as dst:
        try:
            mask_stream(f, dst, masker)
        except Unchecked as e:
            tally.unchecked.append(f"{arc} ({e})")
            if tally.include_unchecked:
                f.seek(0)
                tf.addfile(ti, f)
            return
        ti.size = dst.tell()
        dst.seek(0)
        tf.addfile(ti, dst)


def _analysis_entry(analysis: SweepAnalysis | None, members: list[_Member]) -> dict[str, Any] | None:
    """The report's record of the analysis packed: the folder it came from, how pack found it, and
    each file's path in the tarball with its sha256 (hashed from the file the tarball read)."""
    if analysis is None:
        return None
    wanted = {Path(os.path.realpath(f)) for f in analysis.files}
    files = [{"path": m.arc, "sha256": sha256_file(m.real)} for m in members if not m.is_dir and m.real in wanted]
    return {"folder": str(analysis.folder), "found_by": analysis.found_by, "files": files}


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
    # A run log alone goes back (a run that stopped before its first row says why there); a folder
    # with nothing of a run is the wrong folder (its parent, say), whatever --logs adds.
    if not result_members(results):
        raise ValueError(f"{results}: no step folders, no {SWEEP_CSV} and no {RUN_LOG}: nothing to pack (--results "
                         "is the folder that holds step*/ or conditions_results.csv, e.g. results/pool)")
    analysis, none_why = find_sweep_analysis(results) if results_kind(results) == "sweep" else (None, "")
    members = _result_files(results, analysis)  # a bad link stops the pack before anything is written
    out.parent.mkdir(parents=True, exist_ok=True)
    # Two packs on one name shared its .partial file: the tarball held both streams, and the
    # checksum matched neither. The second now stops; the kernel drops a killed holder's lease.
    lease = try_lease(out)
    if lease is None:
        who = holder(out)
        raise ValueError(f"{out}: another `benchcheck pack` is writing it{f' ({who})' if who else ''}; "
                         "wait for it to end, then run the same command again")
    with lease:
        try:
            return _pack(opts, results, members, out, host, date, (analysis, none_why))
        except BaseException:
            # A pack stopped by an error (or Ctrl-C) leaves no half tarball beside the complete ones,
            # so the folder holds only what a rerun writes; under the lease no other pack writes it.
            _partial(out).unlink(missing_ok=True)
            raise


def _partial(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def _pack(opts: PackOptions, results: Path, members: list[_Member], out: Path, host: str,
          date: str, found: tuple[SweepAnalysis | None, str]) -> PackResult:
    base = stem(out.name)
    tmp = _partial(out)
    masker = secrets_to_mask()
    tally = _LogsTally(opts.include_unchecked)
    # The report (JSON parsing) is built in a thread while the results are compressed (zlib
    # releases the GIL), then goes into the tarball as its last members.
    with ThreadPoolExecutor(max_workers=1) as ex:
        pending = ex.submit(build_report, results, list(opts.logs), host, date, out.name, opts.launcher_note)
        # Closing flushes the last buffered bytes: on a full disk that error names no file either.
        with naming(out), tmp.open("wb") as raw:
            hf = _HashingFile(raw, out)
            # gzip level 6, as `tar -czf`: level 9 (tarfile's default) costs far more time for little
            # less size (see decision 035).
            with tarfile.open(fileobj=hf, mode="w:gz", compresslevel=6) as tf:  # type: ignore[call-overload]
                for m in members:
                    _add_member(tf, m)
                for d in opts.logs:
                    _add_logs(tf, d, arcname(d), masker, tally, Path(os.path.realpath(d)))
                with naming(results):  # a read error of the report's reader names no file
                    report = pending.result()
                report.analysis = _analysis_entry(found[0], members)
                if found[1]:
                    report.notes.append(found[1])
                if tally.links:
                    report.notes.append(f"{len(tally.links)} log entries left out: " + "; ".join(tally.links))
                if tally.unchecked:
                    what = ("packed as they are (--include-unchecked)" if opts.include_unchecked
                            else "left out; pass --include-unchecked to pack them as they are")
                    report.notes.append(f"{len(tally.unchecked)} log files could not be checked for secrets, "
                                        f"{what}: " + "; ".join(tally.unchecked))
                # The report's launch lines are redacted already; the known secret values go too
                # (string by string in the JSON, so it stays valid JSON).
                masked = masker.value(json.loads(json.dumps(report.to_json())))
                report_json = json.dumps(masked, indent=1, ensure_ascii=False).encode() + b"\n"
                report_md = masker.text(to_markdown(report)).encode()
                _bytes_member(tf, f"{base}.report.json", report_json)
                _bytes_member(tf, f"{base}.report.md", report_md)
            raw.flush()
            os.fsync(raw.fileno())
    digest = hf.hash.hexdigest()
    rj, rm = out.with_name(f"{base}.report.json"), out.with_name(f"{base}.report.md")
    for path, data in ((rj, report_json), (rm, report_md)):
        with naming(path):
            write_bytes_atomic(path, data)
    # The tarball is streamed (hashed as it is written) into .partial, fsynced, then renamed:
    # the same guarantees as benchcheck.atomic, which takes whole buffers.
    os.replace(tmp, out)
    sha_file = out.with_name(checksum_name(out.name))
    with naming(sha_file):
        write_bytes_atomic(sha_file, f"{digest}  {out.name}\n".encode())
    return PackResult(out, sha_file, digest, rj, rm, report, tuple(tally.unchecked))


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

    from benchcheck.data.fetch import redact  # the token and a credential URL (HF_ENDPOINT)

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
        msg = redact(f"upload to {repo} failed: {type(e).__name__}: {e}")
        raise UploadError(msg.splitlines()[0]) from e
    return str(info.commit_url)
