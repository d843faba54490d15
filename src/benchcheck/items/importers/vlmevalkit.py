"""A VLMEvalKit MCQ TSV: ``index, question, A, B, ..., answer, video`` (+ ``category``, ``hint``, ...).

Read with the csv module, every cell as text, never through pandas' type guessing (which turns an
option ``3`` into ``3.0``). Options are the letter columns from ``A`` on, up to the first empty cell,
as VLMEvalKit's prompt builders take them; the gold is a letter.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from benchcheck.items.importers import Part, SourceError, long_cells
from benchcheck.items.load import ColumnMap, letter_columns


def defaults(header: list[str]) -> ColumnMap:
    def has(c: str) -> str | None:
        return c if c in header else None

    return ColumnMap(item_id=has("item_id"), bench=has("bench"), question=has("question"),
                     options=letter_columns(header), answer=has("answer"), answer_kind="letter",
                     video_id=has("video_id"), video_key=has("video") or has("video_path"),
                     task=has("category") or has("task"), duration_s=has("duration_s") or has("duration"))


def read_tsv(path: Path, split: str | None = None) -> list[Part]:
    """One part per TSV (a folder: each ``*.tsv`` in it); the benchmark is the file name."""
    del split  # a TSV has one split
    files = sorted(path.glob("*.tsv")) if path.is_dir() else [path]
    if not files:
        raise SourceError(f"{path}: no .tsv file in this folder")
    return [_read_one(f) for f in files]


def _read_one(path: Path) -> Part:
    rows: list[tuple[str, dict[str, Any] | str]] = []
    try:
        with long_cells(), path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t")
            header = list(reader.fieldnames or [])
            start = 2
            for row in reader:
                where, start = str(start), reader.line_num + 1
                if None in row:
                    rows.append((where, "more cells than the header has columns"))
                    continue
                rows.append((where, dict(row)))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SourceError(f"{path}: cannot read the TSV ({type(e).__name__}: {e})") from e
    if "question" not in header or not letter_columns(header):
        raise SourceError(f"{path}: not a VLMEvalKit MCQ TSV (it needs a 'question' column and option columns "
                          f"A, B, ...; columns: {', '.join(header) or 'none'})")
    name = path.name.removesuffix(".tsv")
    return Part(name, str(path), rows, defaults(header), header, index_column="index" if "index" in header else None)
