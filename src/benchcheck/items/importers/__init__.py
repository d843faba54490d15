"""Items from where labs keep their benchmarks: a VLMEvalKit MCQ TSV, an lmms-eval task, a Hugging
Face ``datasets`` folder (docs/items.md, "Importing").

One module per source format reads its records as plain rows (:class:`Part`: a benchmark name, and
per record where it is and the row, or why it cannot be read). :func:`to_items` turns rows into items
with the item loader's own rules (``row_to_item``: the same checks, answers and ids as an item file),
through a column map: the format's defaults, each field overridable by the user's map. The result is
written as plain item files (:func:`write_items`): later commands read those, not the source.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from benchcheck.atomic import jsonl_bytes, write_bytes_atomic
from benchcheck.items.checks import bench_name_problem
from benchcheck.items.ids import ID_PREFIXES, gives_id, qualified_id
from benchcheck.items.load import FILE_LEVEL, ColumnMap, FileRead, ItemRead, LoadResult, Problem, row_to_item, settle
from benchcheck.items.record import Item, video_has_frames

FORMATS = ("vlmevalkit", "lmms-eval", "hf-folder")


class SourceError(ValueError):
    """A source that cannot be read at all (one line naming it and what is wrong)."""


@dataclass(slots=True)
class Part:
    """The records of one benchmark of a source: ``rows`` are (where, row or why it cannot be read)."""

    name: str
    path: str
    rows: list[tuple[str, dict[str, Any] | str]]
    defaults: ColumnMap
    columns: list[str] = field(default_factory=list)
    # A column whose value, prefixed with the benchmark, makes the id when no id column is named
    # (VLMEvalKit's ``index`` restarts at 0 in every TSV).
    index_column: str | None = None


@contextmanager
def long_cells() -> Iterator[None]:
    """The csv module's cell limit lifted while a source is read (a question with a long hint is one
    cell), and put back after: the limit is process-wide, and the item loader keeps its own."""
    old = csv.field_size_limit()
    csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def parse_map(text: str | None) -> tuple[ColumnMap, set[str]]:
    """The user's column map (``FIELD=COLUMN,...``; ``video=`` means ``video_key=``) and the fields it names."""
    if not text:
        return ColumnMap(), set()
    parts = [p.strip() for p in text.split(",") if p.strip()]
    parts = [f"video_key={p[6:]}" if p.startswith("video=") else p for p in parts]
    cmap = ColumnMap.parse(",".join(parts))
    return cmap, {p.partition("=")[0] for p in parts}


def merge_map(defaults: ColumnMap, user: ColumnMap, named: set[str]) -> ColumnMap:
    """Each field the user named wins; the others keep the format's default."""
    return replace(defaults, **{f.name: getattr(user, f.name) for f in fields(ColumnMap) if f.name in named})


def _missing_columns(cmap: ColumnMap, columns: Sequence[str]) -> list[str]:
    names = [cmap.question, cmap.answer, cmap.video_key, cmap.video_id, cmap.task, cmap.bench, cmap.duration_s,
             *(cmap.options or ())]
    if cmap.item_id:
        names += cmap.item_id.split("+") if cmap.item_id not in columns else [cmap.item_id]
    return [n for n in dict.fromkeys(names) if n and n not in columns]


_GAP = "option {gap} is empty but option {later} is not (options are read up to the first empty one)"


def _gap(row: Mapping[str, Any], cols: tuple[str, ...]) -> str | None:
    """With options spread over columns, an empty cell before a filled one (VLMEvalKit keys options by letter)."""
    if len(cols) < 2:
        return None
    blank = [v is None or (isinstance(v, str) and not v.strip()) for v in (row.get(c) for c in cols)]
    for i, b in enumerate(blank):
        if b and not all(blank[i:]):
            later = next(j for j in range(i, len(cols)) if not blank[j])
            return _GAP.format(gap=cols[i], later=cols[later])
    return None


def to_items(parts: Sequence[Part], user_map: str | None = None, bench: str | None = None,
             id_prefix: str | None = None) -> LoadResult:
    """The items of every part, with one problem per bad record (a bad record never stops the rest).
    ``id_prefix="bench"``: each id written as ``BENCH/ID`` (``ids.qualified_id``), before duplicates
    are told, so two benchmarks that number their items alike import together. Ids are settled by
    the item loader's own :func:`~benchcheck.items.load.settle`: duplicates, the repeated-id note
    and the file-wide warnings are those ``items validate`` gives for the same records."""
    if id_prefix is not None and id_prefix not in ID_PREFIXES:
        raise ValueError(f"--id-prefix {id_prefix!r}: expected one of {', '.join(ID_PREFIXES)}")
    user, named = parse_map(user_map)
    return settle([_read_part(part, merge_map(part.defaults, user, named), bench, id_prefix) for part in parts])


def _read_part(part: Part, cmap: ColumnMap, bench: str | None, id_prefix: str | None) -> FileRead:
    """One part's records as the loader reads a file's: problems and items in order, ids not settled yet."""
    out = FileRead(part.path)
    name = bench or part.name
    if (bad := bench_name_problem(name)) is not None:
        out.entries.append(Problem(part.path, FILE_LEVEL, None, bad))
        return out
    if part.columns and (missing := _missing_columns(cmap, part.columns)):
        out.entries.append(Problem(part.path, FILE_LEVEL, None, f"column map: {missing[0]!r} is not a column here "
                                   f"(columns: {', '.join(part.columns)})"))
        return out
    use_index = part.index_column if not cmap.item_id and part.index_column else None
    if use_index:
        cmap = replace(cmap, item_id="__index_id")
    out.records = sum(where != FILE_LEVEL for where, _ in part.rows)
    for index, (where, row) in enumerate(part.rows):
        if isinstance(row, str):
            out.entries.append(Problem(part.path, where, None, row))
            continue
        row = dict(row)
        if use_index:
            row["__index_id"] = f"{name}_{row.get(use_index, index)}"
        if (gap := _gap(row, cmap.options or ())) is not None:
            out.entries.append(Problem(part.path, where, _item_id(row, cmap, name, index), gap))
            continue
        _video_fields(row, cmap)
        try:
            item, item_id, problems = row_to_item(row, cmap, name, index)
        except (TypeError, ValueError) as e:
            out.entries.append(Problem(part.path, where, None, f"cannot read item: {type(e).__name__}: {e}"))
            continue
        out.entries.extend(Problem(part.path, where, item_id, m) for m in problems)
        out.tally_gold(row, cmap, name, item, problems)
        if item is None:
            continue
        if bench:
            item = replace(item, bench=bench)
        if id_prefix == "bench":
            item = replace(item, item_id=qualified_id(item.bench, item.item_id))
        # an id made from VLMEvalKit's index is that column's, as the repeated-id note names it
        read_map = replace(cmap, item_id=use_index) if use_index else cmap
        out.entries.append(ItemRead(where, item, row, read_map, not gives_id(row, cmap.item_id)))
    return out


def _item_id(row: Mapping[str, Any], cmap: ColumnMap, bench: str, index: int) -> str | None:
    """The id a refused record would have had, so its line names the item as every other refusal does."""
    try:
        return row_to_item(dict(row), cmap, bench, index)[1]
    except (TypeError, ValueError):
        return None


def _video_fields(row: dict[str, Any], cmap: ColumnMap) -> None:
    """A ``k:`` placeholder id beside a video key is derived from the key (dropped here, so the key is
    kept); a real (normalized) id beside a key keeps the key as ``meta.video_key``, the original video."""
    vid = row.get(cmap.video_id) if cmap.video_id else None
    key = row.get(cmap.video_key) if cmap.video_key else None
    if not isinstance(key, str) or not key.strip():
        return
    if isinstance(vid, str) and vid.startswith("k:"):
        row[cmap.video_id or ""] = None
    elif isinstance(vid, str) and vid.strip():
        meta = row.get("meta")
        row["meta"] = {**(meta if isinstance(meta, dict) else {}), "video_key": key}


def item_record(item: Item) -> dict[str, Any]:
    """One line of the written item file: the video as the source named it, a real video id when known."""
    key = item.meta.get("video_key")
    meta = {k: v for k, v in item.meta.items() if k != "video_key" or video_has_frames(item.video_id)}
    rec: dict[str, Any] = {"item_id": item.item_id, "bench": item.bench, "question": item.question,
                           "options": list(item.options), "answer": item.answer}
    if isinstance(key, str) and key:
        rec["video"] = key
    if video_has_frames(item.video_id):
        rec["video_id"] = item.video_id
    for name in ("task", "duration_s"):
        if getattr(item, name) is not None:
            rec[name] = getattr(item, name)
    if meta:
        rec["meta"] = meta
    return rec


def file_name(bench: str) -> str:
    """``<bench>.jsonl``: a benchmark name is a safe file name already (``bench_name_problem``), and the
    file's name is the benchmark of its items that name none."""
    return f"{bench}.jsonl"


def write_items(items: Sequence[Item], out: Path, force: bool = False) -> list[Path]:
    """One ``<bench>.jsonl`` per benchmark under ``out``; an existing file is refused unless ``force``."""
    by_bench: dict[str, list[Item]] = {}
    for it in items:
        by_bench.setdefault(it.bench, []).append(it)
    paths = {bench: out / file_name(bench) for bench in by_bench}
    if not force and (there := [p for p in paths.values() if p.exists()]):
        raise SourceError(f"{there[0]} exists: pass --force to replace it, or choose another --out")
    for bench, rows in by_bench.items():
        write_bytes_atomic(paths[bench], jsonl_bytes((item_record(i) for i in rows), default=str))
    return list(paths.values())


def reader(fmt: str) -> Callable[..., list[Part]]:
    if fmt == "vlmevalkit":
        from benchcheck.items.importers.vlmevalkit import read_tsv

        return read_tsv
    if fmt == "lmms-eval":
        from benchcheck.items.importers.lmms_eval import read_task

        return read_task
    if fmt == "hf-folder":
        from benchcheck.items.importers.hf_folder import read_folder

        return read_folder
    raise SourceError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")


def import_items(fmt: str, source: Path, user_map: str | None = None, bench: str | None = None,
                 split: str | None = None, id_prefix: str | None = None) -> LoadResult:
    """Read ``source`` in ``fmt`` and convert it (``SourceError`` when the source cannot be read at all);
    ``id_prefix``: see ``to_items``."""
    extra: dict[str, Any] = {}
    if fmt == "lmms-eval" and user_map and "doc_to_visual" in user_map:
        extra["wanted"] = {"doc_to_text", "doc_to_choice", "doc_to_target", "doc_to_visual"}
    parts = reader(fmt)(source, split=split, **extra)
    return to_items(parts, user_map, bench, id_prefix)
