"""The sweep's files (SPEC section 5, seed 001 layout) and the append-only CSV.

The rows themselves are typed ``records.GenRow``/``ErrorRow`` records in
``<results>/sweep_rows/<condition>/<bench>.jsonl``, written and read only through
``benchcheck.store`` (the spine every screening step uses); ``run_spec.json`` and every spec the
rows were made under (``run_specs.jsonl``) sit beside them.

``<results>/conditions_results.csv`` is seed 001's exchange file, written from those rows
(``sweep.rows.csv_row``) and read as input (the origin's rows, folders made before the rows
existed). It holds one row per (bench, item_id, condition) and config hash (and before it any error
rows of that key: ``settles``; our runs write one, ``sweep.rows.csv_error_row``, for a cell that
failed, so every reader counts it until an answer follows): a row redone under a new hash is
appended after the stale one (so is the answer to an item edited since, or to an edit undone:
``meta``'s ``item_hash`` differs from the key's last row), and readers take the last complete row of
a key (:func:`read_csv`). It is append-only: a writer takes an exclusive ``flock``, re-reads the
keys already present *under the lock* (so two processes on the same work add each key once), ends a
torn last line with a newline, and appends whole rows in one write. Existing rows, whoever wrote
them, are never rewritten: the file before a run is a byte-equal prefix of the file after it. A file
made by another tool keeps its own header; our rows are written in its column order (fields it lacks
stay in the raw JSONL), and a row that is no answer (``error``, ``NA``) goes in only where the file
has a ``status`` column to say so (``_fits``). A row counts only if its ``written_at`` (our last column) is a full
timestamp or the file is not ours: a line cut by a kill is skipped on read and redone.

Beside it: ``<results>/p1_raw/<condition>/<bench>__DIAG_V.jsonl`` (the generated text and
everything about the request), ``<data_logs>/p1_timing.jsonl`` (per bench x condition:
``condition, infer, infer_s, decode_s, prompt_tokens``), ``<data_logs>/failures.jsonl`` and
``<logs>/runner.log``.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.records import NA
from benchcheck.store import append_rows

CSV_NAME = "conditions_results.csv"
ROWS_DIR = "sweep_rows"
RAW_DIR = "p1_raw"
ALL_CONDITIONS = "all"  # run_log.jsonl: the stage of a sweep run's whole-run row (no condition is named so)
COLUMNS: tuple[str, ...] = (
    "bench", "item_id", "condition", "status", "pred", "gold", "correct", "parse", "video_id", "n_frames",
    "width", "height", "prompt_tokens", "infer_s", "decode_s", "model", "config_hash", "meta", "written_at",
)
KEY = ("bench", "item_id", "condition")
# A row's status that is an answer: scored, an ``unparsed`` one (the model answered, no option
# letter could be read: ``sweep.parse``) as wrong. ``NA`` is the condition not applying to the item;
# any other status (another tool's or an older run's ``error``) is no answer: it scores nothing
# and settles nothing (``settles``), so the cell is asked again, as screening asks an error row's item.
ANSWERED = ("ok", "unparsed")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_ITEM_HASH = re.compile(r'"item_hash": "([0-9a-f]+)"')  # in the CSV's ``meta`` (``rows.csv_row``)
Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class SweepPaths:
    """Where a sweep writes; the defaults put ``logs/`` and ``data/logs/`` beside ``results/``."""

    results: Path
    logs: Path
    data_logs: Path

    @staticmethod
    def under(results: str | Path, logs: str | Path | None = None, data_logs: str | Path | None = None) -> SweepPaths:
        r = Path(results)
        return SweepPaths(r, Path(logs) if logs else r.parent / "logs",
                          Path(data_logs) if data_logs else r.parent / "data" / "logs")

    @property
    def csv(self) -> Path:
        return self.results / CSV_NAME

    def raw(self, condition: str, bench: str) -> Path:
        return self.results / RAW_DIR / condition / f"{bench}__DIAG_V.jsonl"

    @property
    def timing(self) -> Path:
        return self.data_logs / "p1_timing.jsonl"

    @property
    def failures(self) -> Path:
        return self.data_logs / "failures.jsonl"

    @property
    def runner_log(self) -> Path:
        return self.logs / "runner.log"

    @property
    def run_log(self) -> Path:
        return self.results / "run_log.jsonl"

    def rows_dir(self, condition: str) -> Path:
        return self.results / ROWS_DIR / condition

    def rows(self, condition: str, bench: str) -> Path:
        """A (bench, condition) group's typed rows (a ``store`` unit file)."""
        return self.rows_dir(condition) / f"{bench}.jsonl"


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _complete(row: Mapping[str, Any], ours: bool) -> bool:
    if any(row.get(k) in (None, "") for k in KEY):
        return False
    return not ours or bool(_STAMP.match(str(row.get("written_at") or "")))


def _parse(text: str) -> tuple[list[str], Iterator[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    header = list(reader.fieldnames or [])
    ours = header[-1:] == ["written_at"]
    return header, (r for r in reader if _complete(r, ours))


@dataclass(frozen=True, slots=True)
class CsvTable:
    """Every complete row of a conditions CSV in file order; ``ours``: written by benchcheck (its
    header ends with ``written_at``), so its ``config_hash`` column is one of our spec hashes."""

    rows: list[dict[str, str]]
    ours: bool
    header: tuple[str, ...] = ()


def read_csv_table(path: str | Path) -> CsvTable:
    p = Path(path)
    if not p.is_file():
        return CsvTable([], True)
    header, rows = _parse(p.read_text(encoding="utf-8", errors="replace"))
    if header and not set(KEY) <= set(header):
        raise ValueError(f"{p}: header lacks {', '.join(k for k in KEY if k not in header)}")
    return CsvTable(list(rows), header[-1:] == ["written_at"], tuple(header))


def read_csv_all(path: str | Path) -> list[dict[str, str]]:
    """Every complete row of a conditions CSV, a key redone under a new hash included."""
    return read_csv_table(path).rows


def latest(rows: Iterable[dict[str, str]], current: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """The row that counts of each key, in the order of those rows: the last one made under its
    condition's ``current`` hash when there is one; a key with rows under other hashes only is stale
    (to redo, as the planner says) and counts not at all, so one condition's accuracy never mixes
    two models' answers. Without a current hash, or a row without a hash (the origin's), the last.
    A row that is no answer (``settles``: another tool's ``error``) never displaces an answer of its
    spec to the same item (:func:`keeps`); it counts only where its key has none, or where the
    answer was to the item before an edit."""
    current = current or {}
    last: dict[Key, dict[str, str]] = {}
    for r in rows:
        k = (str(r["bench"]), str(r["item_id"]), str(r["condition"]))
        now = current.get(k[2])
        held = last.get(k)
        if now and held is not None and held.get("config_hash") == now and r.get("config_hash") != now:
            continue  # a row of another spec does not displace one of the current spec
        if held is not None and keeps(standing(held), standing(r)) \
                and held.get("config_hash") in (r.get("config_hash"), now or None):
            continue
        last.pop(k, None)
        last[k] = r
    return [r for k, r in last.items() if not _stale(r, current.get(k[2]))]


def _stale(row: Mapping[str, str], now: str | None) -> bool:
    made = row.get("config_hash")
    return bool(now and made and made != now)


def condition_specs(results: Path) -> dict[str, dict[str, Any]]:
    """Each condition's spec of its last run (``sweep_rows/<condition>/run_spec.json``); an
    unreadable one is left out."""
    out: dict[str, dict[str, Any]] = {}
    root = results / ROWS_DIR
    if root.is_dir():
        for spec in sorted(root.glob("*/run_spec.json")):
            try:
                data = json.loads(spec.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                out[spec.parent.name] = data
    return out


def current_hashes(results: Path) -> dict[str, str]:
    """Each condition's hash of the last run (``sweep_rows/<condition>/run_spec.json``)."""
    return {c: h for c, s in condition_specs(results).items() if isinstance(h := s.get("config_hash"), str)}


def condition_models(results: Path) -> dict[str, tuple[str, str | None]]:
    """Each condition's model of its last run: (name, revision), as its ``run_spec.json`` says."""
    out: dict[str, tuple[str, str | None]] = {}
    for c, s in condition_specs(results).items():
        m = s.get("model")
        if isinstance(m, dict) and isinstance(m.get("name"), str):
            rev = m.get("revision")
            out[c] = (m["name"], rev if isinstance(rev, str) else None)
    return out


def read_csv(path: str | Path) -> list[dict[str, str]]:
    """The row that counts of each key of a conditions CSV (none when the file is absent): the last
    one under the spec its condition last ran with (``run_spec.json`` beside the typed rows); none
    for a key with rows of other specs only (``latest``). A run that goes back to an earlier spec
    adds no row (its rows are there)."""
    return read_csv_counted(path)[0]


def stale_keys(path: str | Path) -> set[Key]:
    """The keys of a conditions CSV that count nowhere (``read_csv``): rows of other specs only."""
    return read_csv_counted(path)[1]


def read_csv_counted(path: str | Path) -> tuple[list[dict[str, str]], set[Key]]:
    """:func:`read_csv` and :func:`stale_keys` from one read of the file (``pack``'s report counts
    the first and names the second)."""
    p = Path(path)
    rows = read_csv_all(p)
    counted = latest(rows, current_hashes(p.parent))
    return counted, done_keys(rows) - done_keys(counted)


_STATUSES = {s.lower(): s for s in (*ANSWERED, NA)}


def row_status(row: Mapping[str, Any]) -> str:
    """A CSV row's status as the sweep counts it (``ANSWERED``, ``NA`` or any other: no answer);
    a row without one is ``ok``, as seed 001 wrote its answers, and the three known ones are read
    in any case (another tool's ``na``). Every reader of the rows (the dry run and the run, the
    analysis, ``pack``'s report, the report's sweep page) asks this, so they count the same answers."""
    status = str(row.get("status") or "").strip()
    return _STATUSES.get(status.lower(), status) or "ok"


def answered(status: str) -> bool:
    """An answer of the item (``ANSWERED``), scored: ``unparsed`` counts as wrong."""
    return status in ANSWERED


_TRUE = ("1", "1.0", "true", "yes", "y", "t")
_FALSE = ("0", "0.0", "false", "no", "n", "f")


def truth(value: Any) -> bool | None:
    """A ``correct`` cell as a truth value (``1``/``0``, ``true``/``false``, ``yes``/``no``), or None."""
    t = str(value if value is not None else "").strip().lower()
    return True if t in _TRUE else False if t in _FALSE else None


def row_correct(row: Mapping[str, Any]) -> int:
    """The score of an answered row (``answered``): its ``correct`` where that says, else 1 when an
    ``ok`` row's ``pred`` is its ``gold`` (letters, either case); an ``unparsed`` answer without
    ``correct`` is wrong. The status is ``row_status``'s, so a row without one is ``ok`` here as
    everywhere; the analysis scores by this rule."""
    c = truth(row.get("correct"))
    if c is not None:
        return int(c)
    pred, gold = (str(row.get(k) or "").strip().upper() for k in ("pred", "gold"))
    return int(row_status(row) == "ok" and bool(pred) and pred == gold)


def settles(status: str) -> bool:
    """A row of this status settles its cell (``done`` for the dry run): an answer, or ``NA``. Any
    other status (another tool's or an older run's ``error``) is an error row, as in screening: the
    cell is asked again, and the answer's row is appended after it."""
    return answered(status) or status == NA


def item_version(row: Mapping[str, Any]) -> str:
    """The ``item_hash`` a CSV row's ``meta`` names (the item as it was when the row was made), ""
    for none (another tool's row, a folder made before item hashes)."""
    found = _ITEM_HASH.search(str(row.get("meta") or ""))
    return found.group(1) if found else ""


Standing = tuple[str, bool]  # a row as the rule of what counts sees it: (item version, settles)


def standing(row: Mapping[str, Any]) -> Standing:
    return item_version(row), settles(row_status(row))


def keeps(held: Standing, new: Standing) -> bool:
    """Whether a key's row that counts so far (``held``) stays the one that counts when ``new``, a
    later row of the same key and spec, follows it; otherwise ``new`` does. An answer (or ``NA``)
    stays over a later error row of the same item version, or of none named (another tool's
    ``error``): the reducer's rule, the last answer decides. An error row of another version (the
    item was edited, then its cell failed) replaces it: that answer is to a question no longer
    asked, which the reducer calls stale, so it must not count as the cell's answer either. One
    rule for the readers (:func:`latest`) and the appender (``_Seen``), so what the appender takes
    to be in the file is what every reader counts."""
    return held[1] and not new[1] and new[0] in ("", held[0])


def done_keys(rows: Iterable[Mapping[str, Any]]) -> set[Key]:
    return {(str(r["bench"]), str(r["item_id"]), str(r["condition"])) for r in rows}


def _encode(rows: Iterable[Mapping[str, Any]], header: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    for r in rows:
        w.writerow({k: "" if r.get(k) is None else r.get(k) for k in header})
    return buf.getvalue()


def _fits(row: Mapping[str, Any], header: list[str]) -> bool:
    """Whether a row reads back as what it is from a file of this header: one that is no answer
    (``error``, ``NA``) needs the ``status`` column, since a row without one reads as ``ok`` and
    every reader would score it as a wrong answer (and a rerun would take it for the key's answer).
    Such a row stays in ``sweep_rows/`` and ``failures.jsonl`` only."""
    return "status" in header or answered(row_status(row))


@dataclass(slots=True)
class _Seen:
    """What one process has read of a CSV so far: up to ``offset`` (a line boundary), per (key,
    ``config_hash``) the row that counts as every reader takes it (:func:`keeps`), as its
    :data:`Standing` (``counted``); the hash and the version are "" when the file has no
    ``config_hash`` column (then a key is there once)."""

    offset: int
    header: list[str]
    counted: dict[tuple[Key, str], Standing]
    inode: int = 0

    def _id(self, row: Mapping[str, Any]) -> tuple[tuple[Key, str], Standing]:
        k = (str(row["bench"]), str(row["item_id"]), str(row["condition"]))
        if "config_hash" not in self.header:
            return (k, ""), ("", settles(row_status(row)))
        return (k, str(row.get("config_hash") or "")), standing(row)

    def fresh(self, row: Mapping[str, Any]) -> bool:
        """Not in the file yet: a new key, or (when the file keeps hashes) a key under a new hash,
        or a row the readers would take instead of the one that counts now: an answer to the item
        as it is now where the one that counts is an error row or of the item as it was (an item
        edited, or an edit undone); an error row of the item as it is now where the one that counts
        is of the item as it was (edited, then failed: it replaces that answer). An error row of a
        version that has a row already is never fresh: one error row tells a cell has none, however
        many times it failed, and one after its answer would say nothing."""
        key, new = self._id(row)
        held = self.counted.get(key)
        if held is None:
            return True
        return held != new if new[1] else held[0] != new[0]

    def add(self, row: Mapping[str, Any]) -> None:
        key, new = self._id(row)
        held = self.counted.get(key)
        if held is None or not keeps(held, new):
            self.counted[key] = new


_SEEN: dict[Path, _Seen] = {}


def _catch_up(fd: int, p: Path, size: int) -> _Seen:
    """Keys of the file up to its last newline, reading only what this process has not read."""
    seen = _SEEN.get(p)
    inode = os.fstat(fd).st_ino
    if seen is None or seen.offset > size or seen.inode != inode:  # a new or replaced file: read it all
        seen = _Seen(0, [], {}, inode)
    chunk = os.pread(fd, size - seen.offset, seen.offset) if size > seen.offset else b""
    end = chunk.rfind(b"\n") + 1
    if end:
        text = chunk[:end].decode("utf-8", errors="replace")
        if not seen.header:
            first, _, text = text.partition("\n")
            seen.header = next(csv.reader([first]), [])
            if not set(KEY) <= set(seen.header):
                raise ValueError(f"{p}: header lacks {', '.join(k for k in KEY if k not in seen.header)}")
        _, rows = _parse(",".join(seen.header) + "\n" + text) if text else ([], iter(()))
        for r in rows:
            seen.add(r)
        seen.offset += end
    _SEEN[p] = seen
    return seen


def append_csv(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Append rows not in the file yet (a new key, or a key under a new ``config_hash``; checked
    under the lock, so no row is ever there twice); returns rows added."""
    return len(append_csv_fresh(path, rows))


def append_csv_fresh(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """:func:`append_csv`, returning the rows it added (the others were already there)."""
    rows = list(rows)
    if not rows:
        return []
    p = Path(path).resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        seen = _catch_up(fd, p, size)
        if size and not seen.header:
            raise ValueError(f"{p}: no complete header line; move the file away and rerun")
        if size == 0:
            seen.header = list(COLUMNS)
        tail = os.pread(fd, size - seen.offset, seen.offset) if size > seen.offset else b""
        if tail:
            # A last line without its newline (a crash after the row's bytes) counts for readers
            # when it is a whole row, so it is already there; a torn one parses short and is skipped.
            _, whole = _parse(",".join(seen.header) + "\n" + tail.decode("utf-8", errors="replace"))
            for row in whole:
                seen.add(row)
        fresh = _admit(seen, rows)
        if not fresh:
            if size == 0:
                seen.header = []  # nothing written: the file's header is still to be read or written
            return []
        out = ""
        if size == 0:
            out = ",".join(COLUMNS) + "\n"
        elif tail:
            # A line torn by a killed writer: close an open quote and end it, so it parses as one
            # short (skipped) row, or as the whole row it was; the bytes before it stay byte-equal.
            out = ('"' if tail.count(b'"') % 2 else "") + "\n"
        out += _encode(fresh, seen.header)
        data = out.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        seen.offset = size + len(data)
        return fresh
    finally:
        os.close(fd)


def csv_lacks(table: CsvTable, rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows :func:`append_csv_fresh` would add to the file ``table`` was read from
    (:func:`read_csv_table`), in order; nothing is written and no lock taken (a snapshot: a
    reader's count of what a run would still write)."""
    seen = _Seen(0, list(table.header or COLUMNS), {})
    for old in table.rows:
        seen.add(old)
    return _admit(seen, rows)


def _admit(seen: _Seen, rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows of ``rows`` the file behind ``seen`` still lacks, in order, each added to ``seen``
    as it is taken (so a second row of one key in ``rows`` is judged against the first)."""
    out: list[Mapping[str, Any]] = []
    for r in rows:
        if _fits(r, seen.header) and seen.fresh(r):
            seen.add(r)
            out.append(r)
    return out


def append_raw(paths: SweepPaths, condition: str, bench: str, rows: list[dict[str, Any]]) -> None:
    """Raw outputs. The CSV is the authority: a kill between the raw line and its CSV row makes the
    rerun append the item's raw line again (readers keep the last line per item); checking for
    the key here would re-read a file of 582-frame records on every append."""
    append_rows(paths.raw(condition, bench), rows)


def append_failures(paths: SweepPaths, rows: list[dict[str, Any]]) -> None:
    """One line per distinct failure (same item, condition, kind and message once)."""
    append_rows(paths.failures, rows, unique_by=lambda r: (r.get("bench"), r.get("item_id"), r.get("condition"),
                                                           r.get("kind"), r.get("message")))


def append_timing(paths: SweepPaths, rows: list[dict[str, Any]]) -> None:
    append_rows(paths.timing, rows)


def log_line(paths: SweepPaths, message: str) -> None:
    """One timestamped line in ``logs/runner.log`` (appended, so concurrent runs interleave lines)."""
    paths.logs.mkdir(parents=True, exist_ok=True)
    with paths.runner_log.open("a", encoding="utf-8") as f:
        f.write(f"{now_stamp()} {message}\n")
