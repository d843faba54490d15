"""Append-only keyed JSONL results (docs/PROTOCOL.md, "Results"); the only reader and writer of rows.

Rows are appended whole under an exclusive ``flock``; "done" is derived from the rows, never
stored. A writer killed mid-line leaves a torn tail: the next writer ends it with a newline
before appending, and readers skip every line that does not parse, so no row is lost or glued.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchcheck.atomic import jsonl_bytes
from benchcheck.lease import Lease, is_held, try_lease
from benchcheck.records import Record, RowSchemaError, parse_row
from benchcheck.spec import RunSpec, write_run_spec
from benchcheck.verdicts import MAX_ERRORS_PER_ITEM, ItemHashes, StepState

__all__ = ["MAX_ERRORS_PER_ITEM", "Skipped", "StepState", "StepStore", "append_records", "append_rows", "bench_files",
           "bench_of_file", "is_ok", "load_state", "numbered_rows", "read_records", "read_rows", "unit_file"]
_PART = re.compile(r"^(?P<bench>.+?)(?:\.p(?P<part>\d+))?\.jsonl$")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    return jsonl_bytes(rows, default=str)


def append_rows(path: str | Path, rows: Iterable[Mapping[str, Any]], fsync: bool = False,
                unique_by: Callable[[Mapping[str, Any]], object] | None = None) -> int:
    """Append rows (one JSON object per line) under an exclusive lock; returns rows written.

    Several processes may append to one file at once: the lock keeps each batch whole, and
    ``O_APPEND`` puts it at the true end of the file. With ``unique_by``, rows whose key is already
    in the file are dropped, checked under the same lock (so concurrent writers add each key once).
    """
    rows = list(rows)
    if not rows:
        return 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if unique_by is not None:
                have = {unique_by(r) for r in read_rows(path)}
                rows = [r for r in rows if unique_by(r) not in have]
                if not rows:
                    return 0
            data = encode_rows(rows)
            size = os.fstat(fd).st_size
            if size and _last_byte(path, size) != b"\n":
                data = b"\n" + data  # end a torn line left by a killed writer
            _write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return len(rows)


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as f:
        f.seek(size - 1)
        return f.read(1)


def _loads(line: bytes) -> Any:
    """orjson first (faster on big result folders; see decision 041); the standard parser for what
    orjson refuses but json accepts (NaN, Infinity), so the rows that count are exactly the same as before."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def numbered_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every row that parses as a JSON object, with its line number in the file (from 1); torn or
    foreign lines are skipped."""
    p = Path(path)
    if not p.is_file():
        return
    with p.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            obj = _loads(line)
            if obj is None:
                continue
            if isinstance(obj, dict):
                yield n, obj


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every row that parses as a JSON object; torn or foreign lines are skipped."""
    for _, row in numbered_rows(path):
        yield row


def is_ok(row: Mapping[str, Any]) -> bool:
    """A row without ``status`` is ok; any other status is an error row (docs/PROTOCOL.md)."""
    return bool(row.get("status", "ok") == "ok")


def bench_of_file(name: str) -> str | None:
    """``MVBench.jsonl`` and ``MVBench.p3.jsonl`` both belong to ``MVBench``."""
    m = _PART.match(name)
    return m.group("bench") if m else None


def unit_file(step_dir: str | Path, bench: str, part: int, n_parts: int) -> Path:
    """Where a unit's rows go: ``{bench}.jsonl``, or ``{bench}.p{part}.jsonl`` when split."""
    name = f"{bench}.jsonl" if n_parts == 1 else f"{bench}.p{part}.jsonl"
    return Path(step_dir) / name


def bench_files(step_dir: str | Path, benches: Iterable[str] | None = None) -> list[Path]:
    """The result files of a step folder, part files included, optionally for some benchmarks."""
    d = Path(step_dir)
    if not d.is_dir():
        return []
    wanted = set(benches) if benches is not None else None
    out = []
    for p in sorted(d.iterdir()):
        b = bench_of_file(p.name)
        if b is not None and (wanted is None or b in wanted):
            out.append(p)
    return out


@dataclass(slots=True)
class Skipped:
    """The rows a report reads past and names (``pack``'s returns report): ``no_id``, rows without
    an item id (``file:line``), which every reader skips; ``unreadable``, rows whose
    ``schema_version`` this benchcheck cannot read (``file:line (what is wrong)``), which every
    other reader refuses."""

    no_id: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def read_records(path: str | Path, skipped: Skipped | None = None) -> Iterator[Record]:
    """Every row of a result file as its typed record (torn lines skipped, as ``read_rows``).

    A row without an item id (``null`` or missing) is no record of any item and is skipped;
    ``skipped``, when given, gets its ``file:line``. ``RowSchemaError`` names the file and row of a
    row written by a newer benchcheck (or with a ``schema_version`` that is no version), unless
    ``skipped`` is given: a report that names what it skips counts what it can read, so such a
    row goes to ``skipped.unreadable`` and the reading goes on."""
    p = Path(path)
    for n, (line, row) in enumerate(numbered_rows(p), 1):
        try:
            rec = parse_row(row)
        except RowSchemaError as e:  # where it is, formatted only when needed
            if skipped is None:
                raise RowSchemaError(f"{p} (row {n}): {e}") from None
            skipped.unreadable.append(f"{p}:{line} ({e})")
            continue
        if rec is not None:
            yield rec
        elif skipped is not None:
            skipped.no_id.append(f"{p}:{line}")


def append_records(path: str | Path, records: Iterable[Record], fsync: bool = False) -> int:
    """Append typed records (each as the flat JSON object it reads back from)."""
    return append_rows(path, [r.to_dict() for r in records], fsync=fsync)


def load_state(step_dir: str | Path, benches: Iterable[str] | None = None,
               max_errors: int = MAX_ERRORS_PER_ITEM, expect_hash: str | None = None,
               compact: bool = False, expect_items: ItemHashes | None = None,
               skipped: Skipped | None = None) -> StepState:
    """Read every result file of a step folder through the reducer (:class:`StepState`);
    ``skipped``: as :func:`read_records`."""
    state = StepState(max_errors=max_errors, expect_hash=expect_hash, compact=compact, expect_items=expect_items)
    for p in bench_files(step_dir, benches):
        state.add_all(read_records(p, skipped))
    return state


RUN_SPEC_FILE = "run_spec.json"


@dataclass(frozen=True, slots=True)
class StepStore:
    """The rows of one step or condition: a folder of unit files, their leases, its run spec."""

    folder: Path

    def unit_path(self, bench: str, part: int, n_parts: int) -> Path:
        return unit_file(self.folder, bench, part, n_parts)

    def lease(self, path: Path) -> Lease | None:
        return try_lease(path)

    def held(self, path: Path) -> bool:
        return is_held(path)

    def unit_state(self, path: Path, expect_hash: str | None, max_errors: int = MAX_ERRORS_PER_ITEM,
                   expect_items: ItemHashes | None = None) -> StepState:
        """What is done of the unit whose rows go to ``path``: the rows of every file of its
        benchmark, not only ``path``. An item's row may sit in another file when the split
        changed since it was written (another ``--max-unit``, a benchmark grown past it); reading
        only the unit's own file asked those items again and appended a second row."""
        state = StepState(max_errors=max_errors, expect_hash=expect_hash, compact=True, expect_items=expect_items)
        bench = bench_of_file(path.name)
        for p in bench_files(self.folder, [bench]) if bench is not None else [path]:
            state.add_all(read_records(p))
        return state

    def state(self, benches: Iterable[str] | None = None, expect_hash: str | None = None,
              compact: bool = False, expect_items: ItemHashes | None = None,
              skipped: Skipped | None = None) -> StepState:
        return load_state(self.folder, benches, expect_hash=expect_hash, compact=compact, expect_items=expect_items,
                          skipped=skipped)

    def current_state(self, benches: Iterable[str] | None = None, compact: bool = False,
                      items: ItemHashes | None = None, skipped: Skipped | None = None) -> StepState:
        """The rows as the last run's spec and the items now judge them: a row under another
        ``config_hash`` (another model, intro, frame size) is stale, never done, and so is a row
        of an item edited since (``items``: ``items.fingerprints`` of the items read). The one
        rule of the planner, ``assemble``, the report, ``export`` and the audit."""
        return self.state(benches, expect_hash=self.current_hash(), compact=compact, expect_items=items,
                          skipped=skipped)

    def append(self, path: Path, records: Iterable[Record]) -> int:
        return append_records(path, records)

    def write_spec(self, spec: RunSpec) -> Path:
        """``run_spec.json`` beside the rows: what the rows of the current hash were asked with."""
        return write_run_spec(spec, self.folder)

    def current_hash(self) -> str | None:
        """The ``config_hash`` of the last run's spec, or None when the folder has none (rows
        written before run specs were stored are then not judged stale)."""
        try:
            data = json.loads((self.folder / RUN_SPEC_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        h = data.get("config_hash") if isinstance(data, dict) else None
        return h if isinstance(h, str) else None
