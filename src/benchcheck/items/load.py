"""Loaders for JSONL, Parquet and CSV item files, with validation.

A loader never raises for a bad item: it returns the good items and one :class:`Problem` per
bad one (file, line, item id, what is wrong), so a run can report them and go on.
"""

from __future__ import annotations

import csv
import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from benchcheck.items.checks import (
    GoldTally,
    bench_name_problem,
    field_type_problem,
    filled_options,
    not_utf8_fields,
    one_based_golds_problem,
    options_problem,
    video_id_problem,
)
from benchcheck.items.ids import (
    ID_KEYS,
    IdTally,
    default_id,
    duplicate_id_message,
    free_id,
    gives_id,
    id_columns,
    item_id_of,
    nextqa_layout,
)
from benchcheck.items.layouts import json_records, split_lettered_options
from benchcheck.items.record import Item, key_video_id
from benchcheck.protocol import LETTERS, MAX_OPTIONS, strip_sequential_prefix

AnswerKind = Literal["auto", "index", "letter", "text"]

_QUESTION_KEYS = ("question", "query")
_OPTIONS_KEYS = ("options", "candidates", "choices")
_ANSWER_KEYS = ("answer", "gold", "label", "correct_answer")
_VIDEO_KEY_KEYS = ("video", "video_key", "video_path")
_SPREAD_OPTION = re.compile(r"^(?:a|option_?|choice_?|opt_?)(\d+)$", re.I)
_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
# The keys a record may hold: any other key is named when a field is missing (a typo, "qestion").
_KNOWN_KEYS = frozenset({*ID_KEYS, "bench", *_QUESTION_KEYS, *_OPTIONS_KEYS, *_ANSWER_KEYS, "video_id",
                         *_VIDEO_KEY_KEYS, "task", "duration_s", "meta", "format"})
_BOM = "\ufeff"


@dataclass(frozen=True, slots=True)
class Problem:
    """One line of a validation report. ``severity="note"`` or ``"warning"`` does not make the item
    bad; a warning says something looks wrong with a whole benchmark (its golds counted from 1)."""

    path: str
    where: str
    item_id: str | None
    message: str
    severity: Literal["error", "note", "warning"] = "error"
    # A note on the whole file that names one of its records (the first repeated id): printed with
    # the file-level lines, before the per-item lines that would bury it.
    summary: bool = False

    @property
    def first(self) -> bool:
        """Printed before the per-item lines: the file's own problems and its summary notes."""
        return self.where == FILE_LEVEL or self.summary

    @property
    def label(self) -> str:
        """How a command prefixes it on stderr."""
        return {"error": "bad item", "note": "note", "warning": "warning"}[self.severity]

    def __str__(self) -> str:
        who = f" {self.item_id}:" if self.item_id else ""
        return f"{self.path}:{self.where}:{who} {self.message}"


@dataclass(frozen=True, slots=True)
class ColumnMap:
    """Which columns hold which fields; ``None`` means auto-detect.

    ``options`` is either one column holding a list (or a JSON list in a CSV cell) or several
    columns, one option each (``a0,a1,a2,a3,a4`` in the NExT-QA layout).
    Parse one from text with :meth:`parse`: ``"item_id=qid,options=a0|a1|a2,video_key=video"``.
    ``item_id`` may join several columns with ``+``: ``item_id=video+qid`` gives ``{video}_{qid}``
    (benchmarks that number their questions within each video, as NExT-QA does).
    """

    item_id: str | None = None
    bench: str | None = None
    question: str | None = None
    options: tuple[str, ...] | None = None
    answer: str | None = None
    answer_kind: AnswerKind = "auto"
    video_id: str | None = None
    video_key: str | None = None
    task: str | None = None
    duration_s: str | None = None

    @classmethod
    def parse(cls, text: str) -> ColumnMap:
        fields: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"column map: cannot read {part!r} (expected FIELD=COLUMN)")
            if name not in cls.__dataclass_fields__:
                # The part has the FIELD=COLUMN form: saying "expected FIELD=COLUMN" hid the misspelt field.
                raise ValueError(f"column map: unknown field {name!r} in {part!r} "
                                 f"(fields: {', '.join(cls.__dataclass_fields__)})")
            fields[name] = tuple(value.split("|")) if name == "options" else value
        return cls(**fields)


@dataclass(slots=True)
class LoadResult:
    """Good items in file order, the problems found (errors and notes), and records read per file."""

    items: list[Item] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def bench_of_path(path: Path) -> str:
    name = path.name
    for suf in _SUFFIXES:
        if name.lower().endswith(suf):
            return name[: -len(suf)]
    return path.stem


def _first(row: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    return next((k for k in keys if k in row), None)


def _spread_option_columns(columns: Iterable[str]) -> tuple[str, ...]:
    found = [(int(m.group(1)), c) for c in columns if (m := _SPREAD_OPTION.match(c))]
    return tuple(c for _, c in sorted(found))


def letter_columns(columns: Iterable[str]) -> tuple[str, ...]:
    """The option columns named by letter, ``A``, ``B``, ... up to the first letter missing
    (VLMEvalKit's and MMLU's layout); none unless ``A`` and ``B`` both are there: one column
    named ``A`` is no list of options."""
    have = set(columns)
    out: list[str] = []
    for letter in LETTERS:
        if letter not in have:
            break
        out.append(letter)
    return tuple(out) if len(out) >= 2 else ()


def _in_letter_columns(options: tuple[str, ...] | None) -> bool:
    """Options spread over the columns ``A``, ``B``, ... (:func:`letter_columns`)."""
    return options is not None and len(options) > 1 and options == LETTERS[:len(options)]


def resolve_columns(columns: Sequence[str], cmap: ColumnMap) -> ColumnMap:
    """Fill in the auto-detected columns of a map from a file's column names."""
    cols = {c: None for c in columns}
    options = cmap.options
    if options is None:
        one = _first(cols, _OPTIONS_KEYS)
        options = (one,) if one else _spread_option_columns(columns) or letter_columns(columns)
    return ColumnMap(
        item_id=cmap.item_id or default_id(cols, options),
        bench=cmap.bench or ("bench" if "bench" in cols else None),
        question=cmap.question or _first(cols, _QUESTION_KEYS),
        options=options,
        answer=cmap.answer or _first(cols, _ANSWER_KEYS),
        answer_kind=cmap.answer_kind,
        video_id=cmap.video_id or ("video_id" if "video_id" in cols else None),
        video_key=cmap.video_key or _first(cols, _VIDEO_KEY_KEYS),
        # NExT-QA's question type (CW, TN, DC ...) is its task breakdown; elsewhere a "type" column
        # may mean anything, so only a "task" column is read unasked.
        task=cmap.task or ("task" if "task" in cols else "type" if "type" in cols and nextqa_layout(cols, options)
                           else None),
        duration_s=cmap.duration_s or ("duration_s" if "duration_s" in cols else None),
    )


def _is_blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _options_of(row: Mapping[str, Any], cols: tuple[str, ...]) -> Any:
    """The raw options: a list when the row holds one (types are checked by the caller). A column
    holding the whole list that holds text instead (``"a, b, c"``) gives that text: not a list."""
    if len(cols) == 1:
        v = row.get(cols[0])
        if isinstance(v, str):
            s = v.strip()
            if not s:
                return []
            if _SPREAD_OPTION.match(cols[0]):  # one column of the a0..a4 layout: one option
                return [v]
            try:
                v = json.loads(s) if s.startswith("[") else v
            except (json.JSONDecodeError, RecursionError):
                return v
        if v is None:
            return []
        return list(v) if isinstance(v, (list, tuple)) else v
    values = [row.get(c) for c in cols]
    while values and _is_blank(values[-1]):  # fewer options than columns: trailing cells are empty
        values.pop()
    return values


def _text_form(s: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", s).split()).casefold()


def _out_of_range(idx: int, n: int) -> str:
    return f"gold index {idx} out of range for {n} options"


_OUT_OF_RANGE = re.compile(r"^gold index (\d+) out of range for (\d+) options$")


def index_gold(raw: Any) -> int | None:
    """The gold as the file gives it when that is an index (an integer, or digits in a text cell);
    None for a letter or an option text."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    return None


def resolve_answer(value: Any, texts: Sequence[str], raw: Sequence[str], kind: AnswerKind,
                   digits_are_index: bool = False, letter_first: bool = False) -> int | str:
    """Gold index from an index, a letter or the gold text; an error message when none fits.

    With ``kind="auto"``: an integer is an index; a string is first matched against the option
    texts (so numeric options with a text gold work), then read as an index if it is all digits,
    then as a letter, then matched case-insensitively, then in one Unicode form (NFKC, whitespace
    collapsed) when exactly one option matches so. Set ``answer_kind=index`` in the column map
    for a CSV whose options are numbers and whose gold column holds indices. With options spread
    over columns (``a0..a4``), ``digits_are_index`` reads an all-digit gold as an index first: that
    layout stores the gold index (NExT-QA), and its cells are all strings. With options in letter
    columns (``A``, ``B``, ...), ``letter_first`` reads a one-letter gold as a letter first: that
    layout stores the gold letter (VLMEvalKit, MMLU), and an option whose text is a letter
    (``B``) must not take it.
    """
    n = len(texts)
    if isinstance(value, bool):
        # A checkbox or a true/false column mapped as the answer: there is a value, so "no gold
        # answer" would send the user looking for an empty cell.
        return f"gold is a boolean ({str(value).lower()}), not an index, letter or option text"
    if _is_blank(value):
        return "no gold answer"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        if kind not in ("auto", "index"):
            return f"gold {value!r} is not a {kind}"
        return value if 0 <= value < n else _out_of_range(value, n)
    s = str(value).strip()
    if kind == "auto" and digits_are_index and s.isdigit():
        return resolve_answer(int(s), texts, raw, "index")
    if kind == "auto" and letter_first and len(s) == 1 and s.upper() in LETTERS:
        return resolve_answer(s, texts, raw, "letter")
    if kind in ("auto", "text"):
        exact = [i for i, t in enumerate(texts) if t == s] or [i for i, t in enumerate(raw) if t.strip() == s]
        if len(exact) == 1:
            return exact[0]
        if exact:
            # Options written twice ("a", "a"): which of them the gold means cannot be known, and
            # taking the first makes an answer naming the other one wrong.
            return (f"gold {s!r} matches options {', '.join(LETTERS[i] for i in exact)} alike (the same text twice): "
                    "give the letter or the index")
    if kind in ("auto", "index") and s.isdigit():
        idx = int(s)
        return idx if idx < n else _out_of_range(idx, n)
    if kind in ("auto", "letter") and len(s) == 1 and s.upper() in LETTERS:
        idx = LETTERS.index(s.upper())
        return idx if idx < n else f"gold letter {s!r} matches no option ({n} options)"
    if kind in ("auto", "text"):
        # Ignoring case, then in another form: composed or decomposed accents (NFC/NFD), a no-break
        # or full-width space, full-width letters, runs of whitespace. One option only, never a
        # guess: options that differ only so ("Cat", "cat") leave the gold unknown.
        for loose in (str.casefold, _text_form):
            same = [i for i, t in enumerate(texts) if loose(t) == loose(s)]
            if len(same) == 1:
                return same[0]
            if same:
                return (f"gold {s!r} matches no option exactly and options {', '.join(LETTERS[i] for i in same)} "
                        "alike (ignoring case or spacing): give the exact text, the letter or the index")
    return f"gold {s!r} matches no option"


def _missing_field(name: str, expected: Sequence[str], row: Mapping[str, Any]) -> str:
    """A required field no key of the row holds: name the unknown key that looks like a typo of it."""
    unknown = [k for k in row if isinstance(k, str) and k not in _KNOWN_KEYS and not _SPREAD_OPTION.match(k)]
    for k in unknown:
        if (match := difflib.get_close_matches(k.lower(), expected, n=1, cutoff=0.75)):
            return f"no {name} field: unknown key {k!r} (did you mean {match[0]!r}?)"
    others = f"; unknown keys: {', '.join(map(repr, unknown[:5]))}" if unknown else ""
    return f"no {name} field (expected {' or '.join(map(repr, expected))}{others})"


def row_to_item(
    row: Mapping[str, Any], cmap: ColumnMap, bench_default: str, index: int
) -> tuple[Item | None, str | None, list[str]]:
    """One row -> (item or None, item id, problems). Pure: no I/O."""
    names = dict.fromkeys([*id_columns(cmap.item_id, row), cmap.bench, cmap.question, cmap.video_id,
                           cmap.video_key, cmap.task])
    problems = [m for name in names if name
                if (m := field_type_problem(name, row.get(name)))]
    if problems:
        return None, None, problems
    bench = str(row.get(cmap.bench) or bench_default) if cmap.bench else bench_default
    item_id, id_problem = item_id_of(row, cmap.item_id, bench, index)
    problems = [id_problem] if id_problem else []
    if (bad_bench := bench_name_problem(bench)):
        problems.append(bad_bench)
    question = str(row.get(cmap.question) or "").strip() if cmap.question else ""
    if not cmap.question:
        problems.append(_missing_field("question", _QUESTION_KEYS, row))
    elif not question:
        problems.append("empty question")
    if not cmap.options and (lettered := split_lettered_options(question)):
        # Options written into the question (TempCompass): "Q?\nA. x\nB. y".
        question, opts = lettered
    elif not cmap.options:
        return None, item_id, [*problems, _missing_field("options", _OPTIONS_KEYS, row)]
    else:
        opts = _options_of(row, cmap.options)
    if (bad_opts := options_problem(opts, cmap.options or ())):
        return None, item_id, [*problems, bad_opts]
    # Blank options padding a list are dropped before the letters are read ("A. x", "B. y", "")
    # and after ("C. " is blank once its letter is stripped).
    raw_opts, _ = filled_options([str(o) for o in opts])
    texts, blank_problem = filled_options(strip_sequential_prefix(raw_opts)[0])
    raw_opts = raw_opts[:len(texts)]
    if blank_problem:
        return None, item_id, [*problems, blank_problem]
    if len(texts) < 2:
        problems.append(f"fewer than 2 options ({len(texts)})")
    answer: int | str = _missing_field("answer", _ANSWER_KEYS, row)
    if cmap.answer:
        answer = resolve_answer(row.get(cmap.answer), texts, raw_opts, cmap.answer_kind,
                                digits_are_index=len(cmap.options or ()) > 1,
                                letter_first=_in_letter_columns(cmap.options))
    if isinstance(answer, str) and len(texts) >= 2:
        problems.append(answer)
    if problems:
        return None, item_id, problems
    video_id = row.get(cmap.video_id) if cmap.video_id else None
    meta: dict[str, Any] = dict(row["meta"]) if isinstance(row.get("meta"), dict) else {}
    if _is_blank(video_id) and cmap.video_key and not _is_blank(row.get(cmap.video_key)):
        key = str(row[cmap.video_key])
        meta["video_key"] = key
        video_id = key_video_id(key)
    elif not _is_blank(video_id) and (bad_video := video_id_problem(str(video_id))):
        return None, item_id, [bad_video]
    duration = row.get(cmap.duration_s) if cmap.duration_s else None
    assert isinstance(answer, int)
    return (
        Item(
            item_id=item_id,
            bench=bench,
            question=question,
            options=tuple(texts),
            answer=answer,
            video_id=None if _is_blank(video_id) else str(video_id),
            task=str(row[cmap.task]) if cmap.task and not _is_blank(row.get(cmap.task)) else None,
            duration_s=None if duration is None or _is_blank(duration) else float(duration),
            meta=meta,
        ),
        item_id,
        [],
    )


FILE_LEVEL = "0"  # the ``where`` of a problem that concerns the whole file


def _json_line(raw: bytes) -> dict[str, Any] | str:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "line is not UTF-8"
    except json.JSONDecodeError as e:
        return f"line is not JSON ({e.msg})"
    except RecursionError:  # the C decoder's guard: one hostile line must not lose the file
        return "line is nested too deep to read (a JSON value inside ~1,000 others)"
    return obj if isinstance(obj, dict) else "line is not a JSON object"


def csv_delimiter(header: str) -> str:
    """The header line's separator: ``,``, else ``;`` (a spreadsheet saving CSV where the decimal
    mark is a comma) or a tab, whichever the header holds more of. Only the header is looked at:
    a question may hold any of them."""
    if "," in header or not (";" in header or "\t" in header):
        return ","
    return max(";", "\t", key=header.count)


def extra_cells_problem(row: Mapping[Any, Any]) -> str | None:
    """A ``csv.DictReader`` row with more cells than the header (its ``None`` key): every cell after
    the stray separator would be read one column off, so the row is refused, never shifted."""
    if None not in row:
        return None
    return (f"row has {len(row) - 1 + len(row[None])} cells but the header has {len(row) - 1} "
            "(a separator inside a cell that is not quoted?)")


class ShiftedRow(ValueError):
    """A CSV row with more cells than the header, where the reader refuses the whole file for it
    (``items import``); the message names the file and the row's line."""


def _csv_rows(path: Path, refuse_shifted: bool = False) -> Iterator[tuple[str, dict[str, Any] | str]]:
    # surrogateescape keeps a stray non-UTF-8 byte visible (instead of U+FFFD) so that its row
    # alone is reported, as in JSONL; utf-8-sig drops the BOM some spreadsheet tools write.
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        delimiter = csv_delimiter(f.readline())
        f.seek(0)
        reader = csv.DictReader(f, delimiter=delimiter)
        rows = iter(reader)
        start, records = 2, 0
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as e:  # a cell over the csv module's limit: that row only, the reader goes on
                msg = str(e)
                if "field limit" in msg:
                    msg = f"a cell is longer than {csv.field_size_limit():,} characters"
                records += 1
                yield f"{start}", f"cannot read row: {msg}"
                if reader.reader.line_num < start:  # the reader did not move on: nothing more to read
                    break
                start = reader.reader.line_num + 1
                continue
            records += 1
            where, start = f"{start}", reader.line_num + 1
            if (extra := extra_cells_problem(row)):
                if refuse_shifted:
                    raise ShiftedRow(f"{path}:{where}: {extra}")
                yield where, extra
                continue
            bad = not_utf8_fields(row)
            yield where, (f"field {bad[0]!r} is not UTF-8" if bad else row)
        if not records and reader.fieldnames and reader.line_num <= 1:
            yield FILE_LEVEL, "header only: no items"


def jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """(line, object or why not) per non-blank line: lines end at ``\\n`` alone, as JSON lines do."""
    with path.open("rb") as f:
        for n, raw_line in enumerate(f, 1):
            if n == 1 and raw_line.startswith(_BOM.encode()):
                raw_line = raw_line[len(_BOM.encode()):]
            if raw_line.strip():
                yield f"{n}", _json_line(raw_line)


def read_rows(path: Path, refuse_shifted: bool = False) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """(where, row) per record; row is an error message when the record cannot be read. A message
    whose ``where`` is :data:`FILE_LEVEL` concerns the whole file (no items in it). ``where`` is
    how every reader of records names them (``items import`` too): the line a JSONL record or a CSV
    row starts on, ``#N`` in a JSON list, ``row N`` in Parquet. ``refuse_shifted``: a CSV row with
    more cells than the header raises :class:`ShiftedRow` instead of being that row's problem."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from jsonl_rows(path)
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":
                raise
            # A second value after the first: JSON lines under a .json name (as datasets reads them).
            yield from jsonl_rows(path)
            return
        records, refused = json_records(data)
        if refused:
            yield FILE_LEVEL, refused
        yield from records
    elif suffix == ".csv":
        yield from _csv_rows(path, refuse_shifted)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        for n, row in enumerate(pq.read_table(path).to_pylist(), 1):
            yield f"row {n}", row
    else:
        raise ValueError(f"{path}: unknown item file type {suffix!r} (expected .jsonl, .json, .csv or .parquet)")


def _columns_of(path: Path, first: Mapping[str, Any] | None) -> list[str]:
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    return list(first.keys()) if first else []


@dataclass(slots=True)
class ItemRead:
    """A good item as read, before duplicate ids are checked (its id may still be generated)."""

    where: str
    item: Item
    row: Mapping[str, Any]
    cmap: ColumnMap
    generated: bool


@dataclass(slots=True)
class FileRead:
    """One file (or an imported source's benchmark) read: problems and items in file order, and its
    records; :func:`settle` turns several into a :class:`LoadResult`."""

    path: Path | str
    entries: list[Problem | ItemRead] = field(default_factory=list)
    records: int = 0
    golds: dict[str, GoldTally] = field(default_factory=dict)  # bench -> its golds given as an index

    def tally_gold(self, row: Mapping[str, Any], cmap: ColumnMap, bench: str, item: Item | None,
                   problems: Sequence[str]) -> None:
        """Count a row's gold for the 1-based check: a loaded item's gold read as the index the file
        gives (not a text that matched an option), or a refused row's gold one past the last option."""
        given = index_gold(row.get(cmap.answer)) if cmap.answer else None
        if given is None:
            return
        if item is not None:
            if given == item.answer:
                self.golds.setdefault(item.bench, GoldTally()).add(item.answer, len(item.options))
            return
        for m in problems:
            if (hit := _OUT_OF_RANGE.match(m)) and int(hit.group(1)) == int(hit.group(2)) == given:
                self.golds.setdefault(bench, GoldTally()).add(given, given)

    def given_ids(self) -> set[str]:
        return {e.item.item_id for e in self.entries if isinstance(e, ItemRead) and not e.generated}


# Fields a file's rows cannot do without: a map pointing one of them at a column the file lacks
# refuses every row for it ("no gold answer" on each line) without naming the map.
_NEEDED_FIELDS = ("question", "answer")
# Fields an item may lack: a map naming a column the file lacks leaves them unset (one note), so one
# map reads several files that differ in them.
_OPTIONAL_FIELDS = ("bench", "task", "duration_s")


def _absent_mapped(cmap: ColumnMap, resolved: ColumnMap, columns: Sequence[str]) -> tuple[str, str, bool] | None:
    """The first (field, column, needed) the user's map (``cmap``; ``resolved`` for the id's parts)
    names that the file lacks; ``needed``: the file's rows cannot be read without it. Option
    columns count only when none of them is there (a map written for five options reads a file of
    four); the video columns only when none of the mapped ones is (the id or the key is enough)."""
    if missing := [c for c in id_columns(resolved.item_id, columns) if c not in columns]:
        return "item_id", missing[0], True
    for name in _NEEDED_FIELDS:
        col = getattr(cmap, name)
        if col and col not in columns:
            return name, col, True
    if cmap.options and not any(c in columns for c in cmap.options):
        return "options", cmap.options[0], True
    videos = [(name, col) for name in ("video_id", "video_key") if (col := getattr(cmap, name))]
    if videos and not any(col in columns for _, col in videos):
        return videos[0][0], videos[0][1], True
    for name in _OPTIONAL_FIELDS:
        col = getattr(cmap, name)
        if col and col not in columns:
            return name, col, False
    return None


def _read_file(path: Path, cmap: ColumnMap) -> FileRead:
    """Every record of one file parsed; ids are settled later, across files (:func:`_settle`)."""
    out = FileRead(path)
    bench_default = bench_of_path(path)
    resolved: ColumnMap | None = None
    try:
        for index, (where, row) in enumerate(read_rows(path)):
            if where == FILE_LEVEL:
                out.entries.append(Problem(str(path), where, None, str(row)))
                continue
            out.records = index + 1
            if isinstance(row, str):
                out.entries.append(Problem(str(path), where, None, row))
                continue
            if resolved is None or path.suffix.lower() in (".jsonl", ".json"):
                columns = _columns_of(path, row)
                resolved = resolve_columns(columns, cmap)
                if path.suffix.lower() in (".csv", ".parquet") and (
                        absent := _absent_mapped(cmap, resolved, columns)):
                    field_name, column, needed = absent
                    said = (f"column map: {field_name} column {column!r} is not in this file (columns: "
                            f"{', '.join(map(str, columns))})")
                    if needed:
                        out.entries.append(Problem(str(path), FILE_LEVEL, None, said))
                        return out
                    out.entries.append(Problem(str(path), FILE_LEVEL, None, f"{said}; its items have no {field_name}",
                                               severity="note"))
            try:
                item, item_id, problems = row_to_item(row, resolved, bench_default, index)
            except (TypeError, ValueError) as e:  # a field of the wrong type: this row's problem only
                rid = row.get(resolved.item_id) if resolved.item_id else None
                out.entries.append(Problem(str(path), where, None if rid is None else str(rid),
                                           f"cannot read item: {type(e).__name__}: {e}"))
                continue
            out.entries.extend(Problem(str(path), where, item_id, m) for m in problems)
            row_bench = str(row.get(resolved.bench) or bench_default) if resolved.bench else bench_default
            out.tally_gold(row, resolved, row_bench, item, problems)
            if item is not None:
                out.entries.append(ItemRead(where, item, row, resolved, not gives_id(row, resolved.item_id)))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        out.entries.append(Problem(str(path), FILE_LEVEL, None, f"cannot read file: {e}"))
    except Exception as e:  # pyarrow raises its own types for a corrupt file
        out.entries.append(Problem(str(path), FILE_LEVEL, None, f"cannot read file: {type(e).__name__}: {e}"))
    if not out.records and not any(isinstance(e, Problem) and e.where == FILE_LEVEL for e in out.entries):
        empty = ("empty file (0 bytes)" if path.stat().st_size == 0 else "no rows"
                 if path.suffix.lower() == ".parquet" else "no records (blank lines only)")
        out.entries.append(Problem(str(path), FILE_LEVEL, None, f"{empty}: no items"))
    return out


def _settle(read: FileRead, seen: dict[str, tuple[str, str]], taken: set[str], out: LoadResult) -> None:
    """Ids of one file's items: a generated id takes no id given anywhere (``taken``) nor an earlier
    item's; a given id seen before (``seen``: id -> its first item's file and record) is a duplicate.
    Problems and items keep file order."""
    path = str(read.path)
    out.records[path] = read.records
    ids = IdTally()
    resolved: ColumnMap | None = None
    first_bench: dict[str, str] | None = None  # id -> its kept item's benchmark, built at the first duplicate
    for entry in read.entries:
        if isinstance(entry, Problem):
            out.problems.append(entry)
            continue
        item, resolved = entry.item, entry.cmap
        if entry.generated:
            item = replace(item, item_id=free_id(item.item_id, taken | seen.keys()))
        first = seen.get(item.item_id)
        ids.add(entry.row, resolved.item_id, resolved.video_key or resolved.video_id, item.item_id, entry.where,
                first is not None and first[0] == path)
        if first is not None:
            if first_bench is None:
                first_bench = {it.item_id: it.bench for it in out.items}
            out.problems.append(Problem(path, entry.where, item.item_id, duplicate_id_message(
                f"{first[0]}:{first[1]}", first_bench.get(item.item_id), item.bench)))
            continue
        seen[item.item_id] = (path, entry.where)
        if first_bench is not None:
            first_bench[item.item_id] = item.bench
        item = replace(item, source_file=path, source_line=entry.where)
        if item.format == "open":
            out.problems.append(
                Problem(path, entry.where, item.item_id,
                        f"{len(item.options)} options > {MAX_OPTIONS}: format=open, kept but not "
                        "letter-screened", "note")
            )
        out.items.append(item)
    if resolved and (hint := ids.hint(path, resolved.item_id, resolved.video_key or resolved.video_id)):
        out.problems.append(Problem(path, hint[0], None, hint[1], "note", summary=True))
    for bench, tally in read.golds.items():
        if (one_based := one_based_golds_problem(bench, tally)):
            out.problems.append(Problem(path, FILE_LEVEL, None, one_based, "warning"))


def settle(files: Sequence[FileRead]) -> LoadResult:
    """The items of several files read, in order, with every finding that needs them together or a
    whole file: duplicate ids (within and across files, naming the first item's file and record),
    the repeated-id note, open-format notes and the 1-based-golds warning. ``items validate`` (and
    every command that loads items) and ``items import`` both come through here, so they report
    the same records with the same references."""
    taken = set().union(*(f.given_ids() for f in files))
    seen: dict[str, tuple[str, str]] = {}
    out = LoadResult()
    for read in files:
        _settle(read, seen, taken, out)
    return out


def load_path(path: Path, cmap: ColumnMap | None = None) -> LoadResult:
    """Load one file."""
    return settle([_read_file(path, cmap or ColumnMap())])


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; folders expand to their item files, sorted (the suffix in any case, as a
    file given by name is read: ``MyBench.JSONL``)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.iterdir() if q.is_file() and q.name.lower().endswith(_SUFFIXES)))
        else:
            out.append(p)
    seen: set[Path] = set()
    unique = []
    for p in out:  # a file named twice (itself and through its folder) is read once
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def load_items(paths: Iterable[str | Path], cmap: ColumnMap | None = None) -> LoadResult:
    """Load several files (or folders of them); duplicate ids are caught across files too, and a
    generated id never takes an id that any of the files gives."""
    paths = list(paths)
    files = [_read_file(path, cmap or ColumnMap()) for path in expand_paths(paths)]
    # a folder named with nothing to read is that folder's error, not silence
    empty = [FileRead(folder, [Problem(str(folder), FILE_LEVEL, None,
                                       f"no item files ({', '.join(_SUFFIXES)}) in this folder: no items")])
             for folder in (Path(p) for p in paths) if folder.is_dir() and not expand_paths([folder])]
    return settle([*empty, *files])
