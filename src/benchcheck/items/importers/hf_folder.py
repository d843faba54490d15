"""A Hugging Face ``datasets`` folder, read with pyarrow (the ``datasets`` package is not needed).

Layouts, tried in this order:

- ``save_to_disk`` of a ``DatasetDict``: ``dataset_dict.json`` and one folder per split;
- ``save_to_disk`` of a ``Dataset``: ``state.json`` (its ``_data_files``: Arrow stream files) and
  ``dataset_info.json`` (the features: a ``ClassLabel`` answer is read as its label name, a
  ``Video`` or ``Image`` cell as its ``path``);
- a Hub snapshot: ``README.md`` whose front matter lists ``configs`` (one benchmark each) with
  ``data_files`` per split, as ``benchcheck export --format parquet`` writes it;
- any folder of ``.parquet`` / ``.arrow`` / ``.jsonl`` / ``.json`` / ``.csv`` files (one benchmark);
- one such file.

Columns are found as in an item file (``question``/``query``, ``options``/``candidates``/``choices``
or spread ``a0..a4``, ``answer``/``gold``/``label``, ``video``/``video_path``, ...); ``--columns``
names the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchcheck.items.importers import Part, SourceError, long_cells
from benchcheck.items.layouts import Record, json_records
from benchcheck.items.load import FILE_LEVEL, ColumnMap, ShiftedRow, jsonl_rows, read_rows, resolve_columns

DATA_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv")


def read_arrow(path: Path) -> list[dict[str, Any]]:
    """An Arrow IPC file: the stream format ``datasets`` writes, else the random-access file format."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        try:
            return list(pa.ipc.open_stream(src).read_all().to_pylist())
        except pa.ArrowInvalid:
            src.seek(0)
            return list(pa.ipc.open_file(src).read_all().to_pylist())


def data_records(path: Path) -> list[Record]:
    """(where, record or why it cannot be read) per record of one data file, ``where`` as the item
    loader names it (``load.read_rows``: the line a CSV row or a JSON line starts on, ``#N`` in a
    JSON list, ``row N`` in Parquet; Arrow too), so ``items import`` and ``items validate`` name a
    record alike. A file that cannot be read at all is a SourceError naming it; so is a JSON object
    (records keyed by something) and a CSV row with more cells than the header (every later cell
    would be read one column off)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".arrow":
            return [(f"row {n}", r) for n, r in enumerate(read_arrow(path), 1)]
        if suffix in (".csv", ".jsonl", ".parquet"):
            with long_cells():  # a question with a long hint is one cell
                return list(read_rows(path, refuse_shifted=True))
        text = path.read_text(encoding="utf-8-sig")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return list(jsonl_rows(path))  # JSON lines under a .json name, as datasets' json builder reads them too
        if isinstance(data, dict):
            keys = ", ".join(list(map(str, data))[:5])
            raise SourceError(f"{path}: a JSON object (keys: {keys}), not a list of records: "
                              "give a JSON list or JSON lines, one record each")
        records, refused = json_records(data)
        return [(FILE_LEVEL, refused)] if refused else records
    except ShiftedRow as e:
        raise SourceError(str(e)) from e
    except SourceError:
        raise
    except Exception as e:  # pyarrow, json and csv each raise their own types for a damaged file
        raise SourceError(f"{path}: cannot read it ({type(e).__name__}: {e})") from e


def read_data_file(path: Path) -> list[dict[str, Any]]:
    """The records of one data file (a task's documents); one that cannot be read stops it, named."""
    out = []
    for where, r in data_records(path):
        if isinstance(r, str):
            raise SourceError(f"{path}: {r}" if where == FILE_LEVEL else f"{path}:{where}: {r}")
        out.append(r)
    return out


def _in_file(name: str, records: Iterable[Record]) -> Iterator[Record]:
    """A folder's records named by file and record (``sub/a.csv:4``); a file-wide message by file."""
    for where, r in records:
        yield (FILE_LEVEL, f"{name}: {r}") if where == FILE_LEVEL else (f"{name}:{where}", r)


def _features(folder: Path) -> dict[str, Any]:
    info = folder / "dataset_info.json"
    if not info.is_file():
        return {}
    try:
        feats = json.loads(info.read_text(encoding="utf-8")).get("features") or {}
    except (OSError, ValueError):
        return {}
    return feats if isinstance(feats, dict) else {}


def plain(row: dict[str, Any], features: dict[str, Any]) -> dict[str, Any]:
    """A ClassLabel index as its name; a Video/Image cell (``{"path", "bytes"}``) as its path."""
    out = dict(row)
    for name, value in row.items():
        feat = features.get(name)
        if isinstance(feat, dict) and feat.get("_type") == "ClassLabel" and isinstance(value, int):
            names = feat.get("names") or []
            if 0 <= value < len(names):
                out[name] = names[value]
        elif isinstance(value, dict) and "path" in value and set(value) <= {"path", "bytes"}:
            out[name] = value["path"]
    return out


def _pick_split(splits: Sequence[str], split: str | None, where: Path) -> str:
    if split is not None:
        if split not in splits:
            raise SourceError(f"{where}: no split {split!r} (splits: {', '.join(splits)})")
        return split
    if "test" in splits:
        return "test"
    if len(splits) == 1:
        return splits[0]
    raise SourceError(f"{where}: several splits ({', '.join(splits)}): choose one with --split")


def _part(name: str, path: Path, records: Iterable[Record], features: dict[str, Any]) -> Part:
    rows: list[Record] = []
    columns: dict[str, None] = {}
    for where, r in records:
        if isinstance(r, str):
            rows.append((where, r))
            continue
        row = plain(r, features)
        columns.update(dict.fromkeys(row))
        rows.append((where, row))
    cols = list(columns)
    return Part(name, str(path), rows, resolve_columns(cols, ColumnMap()), cols)


def _saved_dataset(folder: Path, name: str) -> Part:
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        files = [folder / str(f["filename"]) for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SourceError(f"{folder / 'state.json'}: not a datasets state file ({type(e).__name__}: {e})") from e
    records = ((f"row {n}", r) for n, r in enumerate((r for f in files for r in read_data_file(f)), 1))
    return _part(name, folder, records, _features(folder))


def _hub_configs(root: Path, split: str | None) -> list[Part] | None:
    """The ``configs`` of a dataset card's front matter, or None when the card has none."""
    import yaml

    card = root / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return None
    try:
        front = yaml.safe_load(text.split("---", 2)[1]) or {}
    except yaml.YAMLError as e:
        raise SourceError(f"{card}: front matter is not YAML ({e})") from e
    configs = front.get("configs") if isinstance(front, dict) else None
    if not isinstance(configs, list) or not configs:
        return None
    parts = []
    for c in configs:
        files = c.get("data_files") if isinstance(c, dict) else None
        if isinstance(files, str):
            files = [{"split": "train", "path": files}]
        if not isinstance(files, list):
            raise SourceError(f"{card}: config {c!r} has no data_files")
        by_split: dict[str, list[str]] = {}
        for entry in files:
            paths = entry.get("path") if isinstance(entry, dict) else entry
            key = str(entry.get("split", "train")) if isinstance(entry, dict) else "train"
            by_split.setdefault(key, []).extend([paths] if isinstance(paths, str) else list(paths or []))
        name = str(c.get("config_name", root.name))
        chosen = _pick_split(list(by_split), split, card)
        found = [p for pattern in by_split[chosen] for p in sorted(root.glob(pattern))]
        if not found:
            raise SourceError(f"{card}: config {name!r} split {chosen!r}: no file matches {by_split[chosen]}")
        records = (rec for f in found for rec in _in_file(f.name, data_records(f)))
        parts.append(_part(name, root / by_split[chosen][0] if len(found) == 1 else root, records, {}))
    return parts


def read_folder(path: Path, split: str | None = None) -> list[Part]:
    if path.is_file():
        if path.suffix.lower() not in DATA_SUFFIXES:
            raise SourceError(f"{path}: not a data file (expected {', '.join(DATA_SUFFIXES)})")
        return [_part(path.stem, path, data_records(path), {})]
    if (path / "dataset_dict.json").is_file():
        try:
            splits = [str(s) for s in json.loads((path / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SourceError(f"{path / 'dataset_dict.json'}: cannot read its splits ({e})") from e
        chosen = _pick_split(splits, split, path)
        return [_saved_dataset(path / chosen, path.name)]
    if (path / "state.json").is_file():
        return [_saved_dataset(path, path.name)]
    if (parts := _hub_configs(path, split)) is not None:
        return parts
    files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix.lower() in DATA_SUFFIXES
                   and not any(p.startswith(".") for p in f.relative_to(path).parts)
                   and (split is None or split in f.relative_to(path).as_posix()))
    if not files:
        raise SourceError(f"{path}: no datasets layout here (no dataset_dict.json, state.json, README.md configs, "
                          f"nor {', '.join(DATA_SUFFIXES)} files)")
    records = (rec for f in files for rec in _in_file(str(f.relative_to(path)), data_records(f)))
    return [_part(path.name, path, records, {})]
