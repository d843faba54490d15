"""``benchcheck export``: the kept (or removed) items of each benchmark in the form a harness reads.

- ``parquet``: a Hugging Face datasets folder: ``data/<bench>/test-00000-of-00001.parquet`` and a
  ``README.md`` whose ``configs`` front matter names one config per benchmark (the Hub's layout);
- ``lmms-eval``: a task folder: one ``<task>.yaml`` per benchmark (``dataset_path: json`` on a
  local ``<bench>_<kept|removed>.jsonl``, ``doc_to_visual/text/choice/target`` and ``process_results``
  from ``utils.py``), and a group YAML over them;
- ``vlmevalkit``: one MCQ TSV per benchmark: ``index, question, A, B, ..., answer, video``
  (+ ``category``, ``item_id``, ``video_id``, ``bench``, ``duration_s``); unused option cells are empty, as
  VLMEvalKit expects.
- ``inspect``: one ``<bench>_<kept|removed>.inspect.jsonl`` per benchmark whose rows are Inspect AI
  ``Sample`` records (``id``, ``input``, ``choices``, ``target``, ``metadata``), read by
  ``inspect_ai.dataset.json_dataset`` with no field mapping.

The ``video`` of each item is the original video, as the item named it (``VIDEO_SOURCES``): the path or
URL of its ``video`` field, or, for a store key (``local::raw::a.mp4``) or a bare ``video_id``, the
source file the store's index records for it. ``video_source="store"`` writes the normalized file
instead (the 2-fps re-encode the screening saw), on request only: a harness should evaluate the
benchmark on its own videos.

Each export records the files it wrote, with their hashes, in a hidden manifest in the folder
(``manifest_name``); a re-export removes only files an earlier one recorded, as recorded (``export``).
Files are written a row at a time (never whole in memory), and one export at a time holds a folder.
"""

from __future__ import annotations

import csv
import errno
import glob
import hashlib
import io
import json
import re
import stat
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from benchcheck.atomic import clear_dead_files, jsonl_bytes, write_atomic, write_bytes_atomic
from benchcheck.data.manifest import safe_relative, sha256_file
from benchcheck.items import Item, video_has_frames
from benchcheck.lease import holder, try_lease
from benchcheck.report.browser import slug
from benchcheck.report.source import Step0, StepProvenance, iter_benches
from benchcheck.screen.fates import EDITED, KEPT, NEVER_SCREENED, REMOVED, RESPEC, RETRYING, WAITING, kept_unscreened

FORMATS = ("lmms-eval", "vlmevalkit", "parquet", "inspect")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True, slots=True)
class Selected:
    item: Item
    removed_at: int | None
    video: str | None
    unscreened: bool = False  # kept without a visual step (``screen.fates.kept_unscreened``)


VIDEO_SOURCES = ("original", "store")


@dataclass(frozen=True, slots=True)
class VideoNames:
    """What the store's index knows: key -> (source file, content hash), content hash -> a source file."""

    store: Path | None = None
    by_key: Mapping[str, tuple[str | None, str]] = field(default_factory=dict)
    by_hash: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, store: Path | None) -> VideoNames:
        if store is None:
            return cls()
        from benchcheck.video.index import INDEX_FILE, done_rows

        by_key: dict[str, tuple[str | None, str]] = {}
        by_hash: dict[str, str] = {}
        for key, row in done_rows(store / INDEX_FILE).items():
            # the absolute path first: ``source`` is as normalize was given it, relative to where it ran
            source = next((v for v in (row.get("source_path"), row.get("source")) if isinstance(v, str) and v), None)
            by_key[key] = (source, str(row["content_hash"]))
            if source:
                by_hash.setdefault(str(row["content_hash"]), source)
        return cls(store, by_key, by_hash)

    def original(self, item: Item) -> str | None:
        """The video as the item named it: its path or URL; a store key or a bare video id becomes
        the source file the index records for it (when it knows one), else stays as it is."""
        key = item.meta.get("video_key")
        if isinstance(key, str) and key.strip():
            source = self.by_key.get(key, (None, ""))[0]
            if source is None and is_relative_path(key) and video_has_frames(item.video_id):
                # relative to the videos folder init was given, which a harness does not know: the
                # source file whose content the item's video id is (so the same video)
                source = self.by_hash.get(str(item.video_id))
            return source or key
        if video_has_frames(item.video_id):
            return self.by_hash.get(str(item.video_id)) or None
        return None

    def normalized(self, item: Item) -> str | None:
        """The store's normalized file of the item (its id, or the id its key was stored under)."""
        from benchcheck.report.browser import safe_video_id

        if self.store is None:
            return None
        vid = item.video_id if video_has_frames(item.video_id) else None
        key = item.meta.get("video_key")
        if vid is None and isinstance(key, str) and key in self.by_key:
            vid = self.by_key[key][1]
        vid = safe_video_id(vid)
        return str((self.store / "normalized" / vid / "video.mp4").resolve()) if vid else None


def export_frames(frames: Path | None) -> Callable[[Item], bool]:
    """Which items have frames, as the export reads it. Without a frame cache that is unknown, so
    every item with a video counts as having them: one that a visual step has not screened yet is
    pending, never kept as if it had skipped the step for lack of frames (the report's reading,
    ``frame_check(None)``, which would export every survivor of the blind steps of a half-run chain)."""
    if frames is None:
        return lambda _item: True
    from benchcheck.report.site import frame_check

    return frame_check(frames)


def is_relative_path(video: str) -> bool:
    """A video named by a relative file path (not a URL, not a store key, not absolute)."""
    return "://" not in video and "::" not in video and not Path(video).is_absolute()


def relative_videos(selected: Mapping[str, Sequence[Selected]]) -> list[str]:
    """The exported videos that are relative paths: a harness reads them from where it runs."""
    return [s.video for rows in selected.values() for s in rows if s.video and is_relative_path(s.video)]


def select(results: Path, items: Sequence[Item], chain: Sequence[int], removed: bool,
           has_frames: Callable[[Item], bool], store: Path | None = None,
           video_source: str = "original", finals: Counter[str] | None = None,
           step0: Step0 | None = None, pending: list[Pending] | None = None) -> dict[str, list[Selected]]:
    """Per benchmark, the items whose final fate is kept (or removed): pending, failed or open
    items are in neither set, so an export never claims an item that was not decided. ``finals``,
    when given, counts every item's final fate; ``pending`` gets each pending item's cause.
    ``step0``: its duplicates are removed at step 0 (``removed_at`` 0), as the report and
    ``assemble --keep`` count them, never pending."""
    if video_source not in VIDEO_SOURCES:
        raise ValueError(f"video source {video_source!r}: expected one of {', '.join(VIDEO_SOURCES)}")
    if video_source == "store" and store is None:
        raise ValueError("--video-source store needs --store (the normalized videos)")
    names = VideoNames.read(store)
    pick = names.normalized if video_source == "store" else names.original
    want = REMOVED if removed else KEPT
    out: dict[str, list[Selected]] = {}
    prov: dict[int, StepProvenance] = {}
    for bench in iter_benches(results, items, chain, has_frames, prov, step0):
        if finals is not None:
            finals.update(ev.final for ev in bench.items)
        if pending is not None:
            pending.extend(Pending(*ev.waiting, ev.item.item_id) for ev in bench.items if ev.waiting)
        out[bench.bench] = [Selected(ev.item, ev.removed_at, pick(ev.item), kept_unscreened(ev.final, ev.fates))
                            for ev in bench.items if ev.final == want]
    return out


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending item: why (``screen.fates.pending_cause``) and the step it waits on."""

    cause: str
    step: int
    item_id: str


# How the export's note says each cause, in this order ({steps}: the steps the items wait on).
PENDING_WORDS = {EDITED: "stale after an edit at step {steps} (their rows there are of the item before it)",
                 RESPEC: "stale at step {steps} (asked under another spec)",
                 RETRYING: "with error rows and retries left at step {steps}",
                 WAITING: "not reached by step {steps} yet",
                 NEVER_SCREENED: "never screened by any step (added since, or left out by screen --keep, "
                                 "--bench or --limit)"}
SHOWN_IDS = 3  # item ids a note names before "..."


def first_ids(ids: Sequence[str]) -> str:
    return ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")


def pending_parts(pending: Sequence[Pending]) -> list[str]:
    """One phrase per cause: how many items, at which steps, the first ids (pure)."""
    out = []
    for cause, words in PENDING_WORDS.items():
        if these := [p for p in pending if p.cause == cause]:
            steps = ", ".join(map(str, sorted({p.step for p in these})))
            out.append(f"{len(these)} {words.format(steps=steps)}: {first_ids([p.item_id for p in these])}")
    return out


def partition(selected: Mapping[str, Sequence[Selected]], why: Callable[[Selected], str | None]
              ) -> tuple[dict[str, list[Selected]], list[tuple[Selected, str]]]:
    """The selection without the items ``why`` gives a reason for, and those items with it (pure).
    A benchmark left with no item keeps its (empty) entry: ``empty_benches`` names it."""
    kept: dict[str, list[Selected]] = {}
    out: list[tuple[Selected, str]] = []
    for bench, rows in selected.items():
        kept[bench] = []
        for s in rows:
            if (reason := why(s)) is None:
                kept[bench].append(s)
            else:
                out.append((s, reason))
    return kept, out


def unsafe_video(s: Selected) -> str | None:
    """Why the exported video path may not go into a harness's file, or None: a relative path that
    leaves the folder it is read from, by the rule screening refuses such a path with."""
    from benchcheck.video.resolve import path_problem

    if not s.video or not is_relative_path(s.video):
        return None
    return path_problem(s.video, "folder a harness reads it from")


def unnamed_videos(selected: Mapping[str, Sequence[Selected]]) -> int:
    """Items that have a video (an id or a key) whose exported ``video`` is empty."""
    return sum(1 for rows in selected.values() for s in rows
               if s.video is None and (s.item.video_id or s.item.meta.get("video_key")))


def record(s: Selected) -> dict[str, Any]:
    it = s.item
    return {"item_id": it.item_id, "bench": it.bench, "question": it.question, "options": list(it.options),
            "answer": it.answer, "answer_letter": LETTERS[it.answer], "video_id": it.video_id, "video": s.video,
            "task": it.task, "duration_s": it.duration_s, "removed_at": s.removed_at}


class Sink(io.RawIOBase):
    """The file an export is writing, hashed as the bytes go through: its size and SHA-256 are known
    when the last row is in, before the file is renamed into place (``write_streamed``)."""

    def __init__(self, f: BinaryIO) -> None:
        super().__init__()
        self._f, self._sha, self._size = f, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:  # bytes, or a buffer (pyarrow's)
        n = self._f.write(data)
        self._sha.update(data)
        self._size += n
        return n

    def written(self) -> Written:
        return Written(self._size, self._sha.hexdigest())


# One file of an export: its path relative to the export folder, and what writes its content into it.
File = tuple[str, Callable[[Sink], None]]


def write_jsonl(rows: Iterable[Any], f: Sink) -> None:
    for row in rows:
        f.write(jsonl_bytes([row]))


def write_bytes(data: bytes, f: Sink) -> None:
    f.write(data)


# Rows a Parquet row group holds (an export holds one group's rows at a time): docs/decisions/137.
PARQUET_GROUP_ROWS = 1000


def write_parquet(rows: Sequence[Selected], f: Sink) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("item_id", pa.string()), ("bench", pa.string()), ("question", pa.string()),
                        ("options", pa.list_(pa.string())), ("answer", pa.int64()), ("answer_letter", pa.string()),
                        ("video_id", pa.string()), ("video", pa.string()), ("task", pa.string()),
                        ("duration_s", pa.float64()), ("removed_at", pa.int64())])
    with pq.ParquetWriter(f, schema) as w:
        for start in range(0, len(rows), PARQUET_GROUP_ROWS):
            group = rows[start:start + PARQUET_GROUP_ROWS]
            w.write_table(pa.Table.from_pylist([record(s) for s in group], schema=schema))


def parquet_files(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> Iterator[File]:
    configs = []
    for bench, rows in selected.items():
        rel = f"data/{slug(bench)}/test-00000-of-00001.parquet"
        yield rel, partial(write_parquet, rows)
        configs.append(f"- config_name: {json.dumps(slug(bench))}\n  data_files:\n  - split: test\n    path: {rel}")
    card = ("---\nconfigs:\n" + "\n".join(configs) + "\n---\n\n# BenchCheck export\n\n"
            f"The {label} items of {len(selected)} benchmarks after screening, one config per benchmark. "
            "`answer` is the index of the gold option in `options`.\n")
    yield "README.md", partial(write_bytes, card.encode("utf-8"))  # the index last, as it is written


def task_name(bench: str, label: str) -> str:
    return f"benchcheck_{slug(bench).lower().replace('-', '_').replace('.', '_')}_{label}"


def task_names(benches: Sequence[str], label: str) -> dict[str, str]:
    """Each benchmark's lmms-eval task name. ``task_name`` folds case, ``-`` and ``.``, so two benchmarks
    (``Video-MME``, ``video_mme``) can fold to one name: one YAML would overwrite the other, its items
    lost and the group naming one task twice. Those that share a name get a short hash of theirs."""
    base = {bench: task_name(bench, label) for bench in benches}
    shared = Counter(base.values())
    return {bench: name if shared[name] == 1 else
            f"{name.removesuffix('_' + label)}_{hashlib.sha1(bench.encode()).hexdigest()[:8]}_{label}"
            for bench, name in base.items()}


def lmms_data_file(bench: str, label: str) -> str:
    """The JSONL a task reads, named for the selection as its YAML is: a kept and a removed export
    into one folder each keep their own items (one ``<bench>.jsonl`` would be the last one written)."""
    return f"{slug(bench)}_{label}.jsonl"


def lmms_eval_files(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> Iterator[File]:
    import yaml

    utils = resources.files("benchcheck.report").joinpath("lmms_eval_utils.py").read_text(encoding="utf-8")
    yield "utils.py", partial(write_bytes, utils.encode("utf-8"))
    tasks = []
    names = task_names(list(selected), label)
    for bench, rows in selected.items():
        name = names[bench]
        data = out / lmms_data_file(bench, label)
        yield data.name, partial(write_jsonl, map(record, rows))
        cfg = {"task": name, "dataset_path": "json",
               # datasets reads data_files as glob patterns: a folder named like `export[v2]` matched nothing
               "dataset_kwargs": {"data_files": {"test": glob.escape(str(data.resolve()))}}, "test_split": "test",
               "output_type": "generate_until",
               "generation_kwargs": {"max_new_tokens": 16, "temperature": 0, "do_sample": False},
               "metric_list": [{"metric": "accuracy", "aggregation": "mean", "higher_is_better": True}],
               "metadata": {"version": 0.0, "source": "benchcheck", "selection": label, "bench": bench,
                            "n_items": len(rows)}}
        text = yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)
        # lmms-eval names task functions with its `!function module.name` tag (not safe_dump-able)
        text += "".join(f"{k}: !function utils.{k}\n" for k in
                        ("doc_to_visual", "doc_to_text", "doc_to_choice", "doc_to_target", "process_results"))
        yield f"{name}.yaml", partial(write_bytes, text.encode("utf-8"))
        tasks.append(name)
    group = {"group": f"benchcheck_{label}", "task": tasks}
    yield f"_benchcheck_{label}.yaml", partial(write_bytes, yaml.safe_dump(group, sort_keys=False).encode("utf-8"))


TSV_TEXT_COLUMNS = ("question", "video", "category", "item_id", "video_id", "bench")  # + the option letters


def tsv_letters(rows: Iterable[Selected]) -> int:
    """How many option columns a TSV of ``rows`` has: the most options of any row (4 for none)."""
    return max((len(s.item.options) for s in rows), default=4)


def tsv_header(k: int) -> list[str]:
    return ["index", "question", *LETTERS[:k], "answer", "video", "category", "item_id", "video_id", "bench",
            "duration_s"]


def tsv_row(j: int, s: Selected, k: int) -> list[str]:
    """The cells (as written) of row ``j`` of a VLMEvalKit MCQ TSV of ``k`` option columns."""
    it = s.item
    opts = [*it.options, *[""] * (k - len(it.options))]
    return [str(j), it.question, *opts, LETTERS[it.answer], s.video or "", it.task or "", it.item_id,
            it.video_id or "", it.bench, "" if it.duration_s is None else repr(it.duration_s)]


class _TextTo:
    """A text stream over a binary one, UTF-8 (what ``csv.writer`` writes into)."""

    def __init__(self, f: Sink) -> None:
        self.f = f

    def write(self, text: str) -> int:
        self.f.write(text.encode("utf-8"))
        return len(text)


def tsv_rows(rows: Sequence[Selected], skip: Container[int] = ()) -> Iterator[tuple[int, Selected]]:
    """The rows of a TSV with their positions in ``rows``, but those in ``skip``: a pass over them
    holds one at a time (each pass makes a new one)."""
    return ((i, s) for i, s in enumerate(rows) if i not in skip)


def write_tsv(rows: Sequence[Selected], left_out: Container[int], f: Sink) -> None:
    """The TSV of ``rows`` but those ``left_out`` (by position), a row at a time."""
    w = csv.writer(_TextTo(f), delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    k = tsv_letters(s for _, s in tsv_rows(rows, left_out))
    w.writerow(tsv_header(k))
    for j, (_, s) in enumerate(tsv_rows(rows, left_out)):
        w.writerow(tsv_row(j, s, k))


# pandas' default missing-value words: VLMEvalKit reads TSVs with plain ``pd.read_csv(sep="\t")``, so an
# option or question spelled exactly like one of these would come back as NaN (an option silently lost).
PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                       "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_BOOL_WORDS = frozenset({"True", "False", "TRUE", "FALSE", "true", "false"})
_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = (-(2**63), 2**63 - 1)


def tsv_unsafe(item: Item) -> str | None:
    """Why an item cannot round-trip through a VLMEvalKit TSV, or None."""
    for j, text in enumerate([item.question, *item.options]):
        if text.strip() in PANDAS_NA:
            what = "question" if j == 0 else f"option {LETTERS[j - 1]}"
            return f"{what} {text!r} reads back as missing in pandas (VLMEvalKit's reader)"
    return None


def _is_na(text: str) -> bool:
    return text.strip() in PANDAS_NA


# What pandas' C parser may read as a number, and a little more (digits of other scripts, spaces, signs):
# a superset errs on the safe side. Not ``float()``: it takes ``4000_0`` (an id) for 40000.
_NUMBER = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\s*", re.I)


def _is_number(text: str) -> bool:
    return bool(_NUMBER.fullmatch(text))


@dataclass(slots=True)
class ColumnType:
    """The type pandas gives one TSV column, folded over its cells one at a time (``add``), so a
    column is typed without holding it: numbers when every cell that is not missing reads as a number
    (integers only without a missing cell, else floats), booleans when every one is a true/false word,
    text otherwise."""

    values: bool = False  # a cell that is not missing
    missing: bool = False
    missing_words: bool = False  # a missing cell that is not empty (``NA``, ``null``)
    numbers: bool = True  # of the cells not missing
    ints: bool = True
    bools: bool = True

    def add(self, cell: str) -> None:
        if _is_na(cell):
            self.missing = True
            self.missing_words = self.missing_words or bool(cell)
            return
        self.values = True
        self.numbers = self.numbers and _is_number(cell)
        self.ints = self.ints and bool(_INT.fullmatch(cell)) and _INT64[0] <= int(cell) <= _INT64[1]
        self.bools = self.bools and cell.strip() in _BOOL_WORDS

    @property
    def as_written(self) -> bool:
        """Every cell reads back as written (``reads``): a text column in which only an empty cell is missing."""
        return not (self.values and (self.numbers or self.bools)) and not self.missing_words

    def reads(self, cell: str) -> str | None:
        """What ``str(value)`` gives for ``cell`` of this column after pandas' ``read_csv`` (None: NaN).
        The model errs on the safe side: a cell it is not sure reads back as written (a float with more
        than 15 significant digits, a number with spaces or a sign) is answered as something else, so
        the caller leaves its item out."""
        if self.values and self.numbers and self.ints and not self.missing:
            return str(int(cell))
        if _is_na(cell):
            return None
        if self.values and self.numbers:
            try:
                x = float(cell)
            except ValueError:  # a digit of another script pandas may not take: not as written either way
                return f"{cell} (unreadable)"
            digits = len(re.sub(r"[^0-9]", "", cell.split("e")[0].split("E")[0]).lstrip("0"))
            return str(x) if digits <= 15 else f"{cell} (rounded)"
        if self.values and self.bools:
            return str(cell.strip().lower() == "true")
        return cell


def pandas_reads(cells: Sequence[str]) -> list[str | None]:
    """What ``str(value)`` gives for each cell of one TSV column after pandas' ``read_csv`` (None: NaN)."""
    column = ColumnType()
    for c in cells:
        column.add(c)
    return [column.reads(c) for c in cells]


def tsv_readback_problems(rows: Sequence[Selected], skip: Container[int] = ()) -> dict[int, str]:
    """Row position -> why a cell of that row would not read back as written (``ColumnType``), in the
    TSV of ``rows`` but those in ``skip``. Two passes over the rows, a row's cells at a time: the
    columns' types, then each cell of a column that may not read back against its column's type."""
    k = tsv_letters(s for _, s in tsv_rows(rows, skip))
    cols = tsv_header(k)
    text = [(j, c) for j, c in enumerate(cols) if c in TSV_TEXT_COLUMNS or (len(c) == 1 and c in LETTERS)]
    types = {j: ColumnType() for j, _ in text}
    for i, s in tsv_rows(rows, skip):
        cells = tsv_row(i, s, k)
        for j, _ in text:
            types[j].add(cells[j])
    out: dict[int, str] = {}
    if not (text := [(j, col) for j, col in text if not types[j].as_written]):
        return out
    for i, s in tsv_rows(rows, skip):
        cells = tsv_row(i, s, k)
        for j, col in text:
            wrote, got = cells[j], types[j].reads(cells[j])
            if wrote and got != wrote:
                what = f"option {col}" if len(col) == 1 else col
                read = "missing" if got is None else repr(got)
                out[i] = (f"{what} {wrote!r} reads back as {read} in pandas (VLMEvalKit's reader): pandas types "
                          f"the column {col!r} from all its cells")
                break
    return out


def tsv_left_out(rows: Sequence[Selected]) -> dict[int, str]:
    """The rows (by position) that would not read back as written, with the reason. Leaving a row out
    can change a column's type (its one text cell gone), so the check runs again until nothing changes."""
    bad = {i: why for i, s in enumerate(rows) if (why := tsv_unsafe(s.item)) is not None}
    while problems := tsv_readback_problems(rows, bad):
        bad.update(sorted(problems.items()))
    return bad


def vlmevalkit_files(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> Iterator[File]:
    """Items that would not read back whole are left out and listed in ``<name>.left_out.jsonl``."""
    for bench, rows in selected.items():
        name = f"{slug(bench)}_{label}.tsv"
        bad = tsv_left_out(rows)
        yield name, partial(write_tsv, rows, bad)
        if bad:
            yield str(Path(name).with_suffix(".left_out.jsonl")), partial(write_jsonl, (
                {"item_id": rows[i].item.item_id, "bench": bench, "reason": why} for i, why in bad.items()))


def inspect_data_file(bench: str, label: str) -> str:
    """Not ``<bench>_<label>.jsonl``: that is the lmms-eval task's data file, which an Inspect export into
    the same folder would overwrite (and, for a benchmark left empty, delete)."""
    return f"{slug(bench)}_{label}.inspect.jsonl"


# Inspect's ContentVideo takes only these formats. The format is a MIME hint: Inspect reads a file's
# type from its name first, so another container (.webm, .mkv) declared "mp4" is still sent as itself.
INSPECT_VIDEO_FORMATS = {".mov": "mov", ".mpeg": "mpeg", ".mpg": "mpeg"}


def inspect_video_format(video: str) -> str:
    path = urlsplit(video).path if "://" in video else video
    return INSPECT_VIDEO_FORMATS.get(PurePosixPath(path).suffix.lower(), "mp4")


def inspect_sample(s: Selected, label: str) -> dict[str, Any]:
    """One Inspect ``Sample`` as ``json_dataset`` reads it: a user message with the video then the
    question (a multiple-choice solver rewrites the text part and keeps the video), or the question
    alone for an item without a video; the gold as a letter, as Inspect's ``choice()`` scorer reads it."""
    it = s.item
    prompt: str | list[dict[str, Any]] = it.question
    if s.video:
        prompt = [{"role": "user", "content": [
            {"type": "video", "video": s.video, "format": inspect_video_format(s.video)},
            {"type": "text", "text": it.question}]}]
    return {"id": it.item_id, "input": prompt, "choices": list(it.options), "target": LETTERS[it.answer],
            "metadata": {"bench": it.bench, "task": it.task, "video_id": it.video_id, "duration_s": it.duration_s,
                         "fate": label, "removed_at": s.removed_at}}


# Line breaks to Python's str.splitlines (and to JavaScript) that JSON leaves unescaped: a reader that
# splits the file that way would cut a question holding one in two.
_UNICODE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def jsonl_line(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False).translate(_UNICODE_BREAKS) + "\n"


def write_inspect(rows: Sequence[Selected], label: str, f: Sink) -> None:
    for s in rows:
        f.write(jsonl_line(inspect_sample(s, label)).encode("utf-8"))


def inspect_files(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> Iterator[File]:
    for bench, rows in selected.items():
        yield inspect_data_file(bench, label), partial(write_inspect, rows, label)


# Each format's files, in the order they are written (an index file last). Each is written a row at a
# time: an export holds one row (a Parquet row group) of a file, never the file.
WRITERS: dict[str, Callable[[Path, Mapping[str, Sequence[Selected]], str], Iterator[File]]] = {
    "parquet": parquet_files, "lmms-eval": lmms_eval_files, "vlmevalkit": vlmevalkit_files, "inspect": inspect_files}


def write_streamed(path: Path, write: Callable[[Sink], None], claim: Callable[[Written], None]) -> None:
    """Write the file at ``path`` through a temporary file beside it (``write_atomic``: a reader or a
    kill finds the old file or the new one whole), hashing it as it goes; ``claim`` gets its size and
    hash after its last byte, before the rename makes it the file at ``path``."""
    def fill(f: BinaryIO) -> None:
        sink = Sink(f)
        write(sink)
        claim(sink.written())

    write_atomic(path, fill)


def empty_benches(selected: Mapping[str, Sequence[Selected]]) -> list[str]:
    """Benchmarks with no item in the selection (every item removed, or none, or all failed). They are
    left out of an export: a harness's loader stops on an empty data file (``datasets`` reads an empty
    JSONL or a 0-row Parquet as an error), and one such task in the group or one such file in the
    folder stops the whole export from loading."""
    return [bench for bench, rows in selected.items() if not rows]


# The names each format's per-benchmark files take (``{label}``: kept or removed), as glob patterns. The
# benchcheck before manifests removed every match; a user's file matches as well (``my_kept.jsonl``), so now
# they only name, in a note, what a folder with no manifest may hold from such an export.
UNRECORDED_PATTERNS = {"parquet": ("data/*/test-00000-of-00001.parquet",),
                       "lmms-eval": ("*_{label}.jsonl", "benchcheck_*_{label}.yaml"),
                       "vlmevalkit": ("*_{label}.tsv", "*_{label}.left_out.jsonl"),
                       "inspect": ("*_{label}.inspect.jsonl",)}

MANIFEST_VERSION = 1


def manifest_name(fmt: str, label: str) -> str:
    """One manifest per format and selection, so exports that share a folder never touch each other's
    files. Parquet's files carry no label (one dataset a folder): its kept and removed exports are one.
    Not ``.json``: ``--items FOLDER`` reads every ``.json`` in a folder as items, an export's included."""
    return f".benchcheck_export_{fmt}.manifest" if fmt == "parquet" else f".benchcheck_export_{fmt}_{label}.manifest"


@dataclass(frozen=True, slots=True)
class Written:
    """A file as an export wrote it: a file there now with another size or hash is not the export's."""

    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> Written:
        return cls(len(data), hashlib.sha256(data).hexdigest())

    def json(self) -> dict[str, Any]:
        return {"size": self.size, "sha256": self.sha256}


@dataclass(slots=True)
class Claims:
    """What a manifest says earlier exports wrote: each path with every content an export wrote there
    (more than one only in the manifest of an export cut short). ``unrecorded``: why the folder may hold
    files of an export that no manifest records (``unrecorded_reason``), or None."""

    files: dict[str, list[Written]] = field(default_factory=dict)
    unrecorded: str | None = None


@dataclass(slots=True)
class Cleanup:
    """What an export did with the files of the one before it in the folder."""

    removed: list[Path] = field(default_factory=list)
    changed: list[Path] = field(default_factory=list)  # an earlier export's, changed since: left
    unrecorded: list[Path] = field(default_factory=list)  # named like the format's own, no manifest records them
    unrecorded_why: str | None = None  # why no manifest records them (with ``unrecorded``)
    unreadable: str | None = None  # why the manifest there could not be read by this export


def unrecorded_reason(manifest: Path, unreadable: str | None = None) -> str:
    """Why no manifest records the files of an earlier export, as a note says it on every export that
    finds them (so in the past tense): there was no manifest, or it could not be read."""
    if unreadable is not None:
        return f"its manifest could not be read: {unreadable}"
    return f"there was no {manifest.name}: a benchcheck before export manifests wrote none"


def _written(entry: object) -> Written:
    if not (isinstance(entry, dict) and isinstance(entry.get("size"), int) and isinstance(entry.get("sha256"), str)
            and re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])):
        raise ValueError(f"not a file record: {entry!r}")
    return Written(entry["size"], entry["sha256"])


def read_manifest(path: Path, fmt: str) -> Claims | None:
    """The claims of the manifest at ``path``; None when there is none. ValueError: it cannot be read."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from e
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("benchcheck_export") != MANIFEST_VERSION or doc.get("format") != fmt:
            raise ValueError(f"not a version-{MANIFEST_VERSION} manifest of a {fmt} export")
        why, unreadable = doc.get("unrecorded"), doc.get("unreadable")  # "unreadable": an older manifest's
        claims = Claims(unrecorded=why if isinstance(why, str) else
                        unrecorded_reason(path, unreadable) if isinstance(unreadable, str) else
                        unrecorded_reason(path) if why else None)
        for section in ("files", "earlier"):
            for rel, entries in dict(doc.get(section) or {}).items():
                got = [_written(e) for e in (entries if isinstance(entries, list) else [entries])]
                if isinstance(rel, str) and safe_relative(rel):  # never a file outside the folder
                    claims.files.setdefault(rel, []).extend(got)
        return claims
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(str(e)) from e


def write_manifest(path: Path, fmt: str, label: str, files: Mapping[str, Written],
                   earlier: Claims | None = None, unrecorded: str | None = None) -> None:
    """``earlier``, while the export runs: the files of the exports before it, which it may not have
    replaced or removed yet; a run cut short leaves them claimed, with the new ones, for the next run.
    ``unrecorded``: why files of an earlier export that no manifest records may be in the folder."""
    doc: dict[str, Any] = {"benchcheck_export": MANIFEST_VERSION, "format": fmt, "selection": label,
                           "complete": earlier is None, "files": {rel: w.json() for rel, w in sorted(files.items())}}
    if earlier is not None:
        doc["earlier"] = {rel: [w.json() for w in ws] for rel, ws in sorted(earlier.files.items())}
        unrecorded = earlier.unrecorded
    if unrecorded is not None:
        doc["unrecorded"] = unrecorded
    write_bytes_atomic(path, json.dumps(doc, indent=1, ensure_ascii=True).encode("ascii") + b"\n")


def _file_written(path: Path) -> Written | None:
    """The size and hash of a regular file at ``path`` (not a link, a folder: never an export's file)."""
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            return None
        digest = sha256_file(path)
    except FileNotFoundError:
        return None
    return Written(st.st_size, digest)


def remove_earlier(out: Path, claims: Claims, keep: Iterable[str], cleanup: Cleanup) -> None:
    """Remove the files an earlier export wrote (``claims``) that this one did not (``keep``): those of a
    benchmark it held and this one does not (its item file not given, its items gone, or none selected
    now). A harness reads the folder whole (lmms-eval's ``--include_path``, ``data_dir``, a glob over the
    TSVs), so it would take them as part of this export. A file whose content is no longer what that
    export wrote has been replaced (by the user, or another program): it is left, and said so."""
    kept = set(keep)
    for rel in sorted(claims.files):
        if rel in kept:
            continue
        p = out / rel
        if not p.exists() and not p.is_symlink():
            continue
        if _file_written(p) not in claims.files[rel]:
            cleanup.changed.append(p)
            continue
        p.unlink(missing_ok=True)
        cleanup.removed.append(p)
        if p.parent != out and not any(p.parent.iterdir()):
            p.parent.rmdir()


def unrecorded_files(out: Path, fmt: str, label: str, keep: Iterable[str]) -> list[Path]:
    """Files named like ``fmt``'s per-benchmark files that this export did not write, in a folder with no
    manifest: an export made before manifests, or the user's own; which, nothing says, so none is removed."""
    kept = set(keep)
    return sorted({p for pattern in UNRECORDED_PATTERNS[fmt] for p in out.glob(pattern.format(label=label))
                   if p.is_file() and p.relative_to(out).as_posix() not in kept})


# The lease an export holds on its folder (``lease.lock_path``: ``.leases/.benchcheck_export.lock`` in it).
EXPORT_LEASE = ".benchcheck_export"


@contextmanager
def folder_lease(out: Path) -> Iterator[None]:
    """Hold the folder for one export. Exports into one folder read and rewrite the same manifests and
    files: two at once would each remove files the other just wrote, or claim them as theirs. The
    second is refused at once (an ``OSError`` naming the folder), never made to wait: two exports
    into one folder at once are a mistake to be told (docs/report.md). The kernel drops the lease
    when its holder exits, however it exits."""
    target = out / EXPORT_LEASE
    lease = try_lease(target)
    if lease is None:
        who = holder(target)
        raise BlockingIOError(errno.EWOULDBLOCK, "another export is writing this folder"
                              + (f" ({who})" if who else "") + "; run one export at a time into a folder", str(out))
    with lease:
        yield


def export(fmt: str, out: Path, selected: Mapping[str, Sequence[Selected]], removed: bool,
           cleanup: Cleanup | None = None) -> list[Path]:
    """Write the export; ``cleanup``, when given, gets what became of the files of an earlier export.

    Only files a manifest (``manifest_name``) records are ever removed. The steps, each safe to cut
    short: the manifest first claims the files of the earlier exports; then each new file is written
    to a temporary file, claimed (its hash now known) and renamed into place; then the earlier ones not
    rewritten are removed; last the manifest is rewritten to name only the new ones. A run cut short
    leaves a manifest whose every file is either gone or has a content an export wrote, so the next
    run removes what this one could not, and nothing else (a file an export never wrote has none of
    its hashes). One export at a time holds the folder (``folder_lease``)."""
    if fmt not in WRITERS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    label = "removed" if removed else "kept"
    cleanup = Cleanup() if cleanup is None else cleanup
    out.mkdir(parents=True, exist_ok=True)
    with folder_lease(out):
        return _export(fmt, out, selected, label, cleanup)


def clear_dead_writes(out: Path) -> None:
    """Remove the temporary files (``write_atomic``'s) of an export killed mid-file. ``write_atomic``
    clears those of a file when it writes that file again, but a file the next export does not write (a
    benchmark no longer selected) would keep its dead one, up to a whole file's size, for good. Only a
    dead writer's are removed, in the folders an export writes into."""
    for folder in [out, *(p for p in sorted((out / "data").glob("*")) if p.is_dir())]:
        clear_dead_files(folder, ".")


def _export(fmt: str, out: Path, selected: Mapping[str, Sequence[Selected]], label: str,
            cleanup: Cleanup) -> list[Path]:
    clear_dead_writes(out)
    manifest = out / manifest_name(fmt, label)
    try:
        read = read_manifest(manifest, fmt)
    except ValueError as e:
        # a manifest that does not read says nothing of which files are the export's: none is removed
        cleanup.unreadable = f"{manifest}: {e}"
        read = None
    # no manifest read: this export finds that the folder may hold files none records
    claims = read or Claims(unrecorded=unrecorded_reason(manifest, cleanup.unreadable))
    written: dict[str, Written] = {}
    write_manifest(manifest, fmt, label, written, claims)

    def claim(rel: str, w: Written) -> None:
        written[rel] = w
        write_manifest(manifest, fmt, label, written, claims)

    # an empty benchmark is written by no format: its files from an earlier export go with the others'
    paths = []
    for rel, write in WRITERS[fmt](out, {bench: rows for bench, rows in selected.items() if rows}, label):
        write_streamed(out / rel, write, partial(claim, rel))
        paths.append(out / rel)
    remove_earlier(out, claims, written, cleanup)
    lookalikes = unrecorded_files(out, fmt, label, [*written, *claims.files]) if claims.unrecorded else []
    # One rule for a folder with no manifest and for one whose manifest did not read: the manifest
    # carries why while files named like the export's are left, so every export names them until the
    # user has acted on them (moved or deleted them).
    kept = claims.unrecorded if lookalikes else None
    if kept is not None:
        cleanup.unrecorded.extend(lookalikes)
        cleanup.unrecorded_why = kept if read is None else f"when an export first found them, {kept}"
    write_manifest(manifest, fmt, label, written, unrecorded=kept)
    return paths
