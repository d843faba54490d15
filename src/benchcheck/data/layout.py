"""Where a fetch puts things, and the records that make a rerun do only what is missing.

``OUT/<kind>_tar/`` mirrors the repository's files (manifest and shards), ``OUT/frames/pool_frames``
or ``OUT/store/normalized`` receives the extracted video folders, and ``OUT/.benchcheck/`` holds
``fetch_<kind>.json`` (what was fetched: repo, commit, manifest, target) and the append-only
``extracted_<kind>.jsonl`` (one row per shard extracted, with its sha256 and its video ids).
A shard counts as done only when its row is there with the manifest's sha256 and the same target.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic
from benchcheck.data.manifest import ShardKind
from benchcheck.store import append_rows, read_rows

STATE_DIR = ".benchcheck"
SHARDS_DIR: dict[ShardKind, str] = {"frames": "frames_tar", "videos": "videos_tar"}
TARGET_DIR: dict[ShardKind, str] = {"frames": "frames/pool_frames", "videos": "store/normalized"}


@dataclass(frozen=True, slots=True)
class FetchRecord:
    """What a fetch of one kind used; ``manifest`` and ``target`` are absolute paths in memory and
    stored relative to OUT when inside it, so a package folder can be moved and still verified."""

    kind: ShardKind
    repo: str
    revision: str
    commit: str
    manifest: str
    target: str


def record_path(out: str | Path, kind: ShardKind) -> Path:
    return Path(out) / STATE_DIR / f"fetch_{kind}.json"


def extracted_log(out: str | Path, kind: ShardKind) -> Path:
    return Path(out) / STATE_DIR / f"extracted_{kind}.jsonl"


def relative_to_out(path: str | Path, out: Path) -> str:
    """``path`` relative to OUT when inside it (so the package folder can move), else as it is."""
    try:
        return Path(path).relative_to(out).as_posix()
    except ValueError:
        return str(path)


def write_record(out: str | Path, rec: FetchRecord) -> None:
    o = Path(out).resolve()
    data = asdict(rec) | {"manifest": relative_to_out(rec.manifest, o), "target": relative_to_out(rec.target, o)}
    write_json_atomic(record_path(out, rec.kind), data, indent=1)


class RecordError(ValueError):
    """A fetch record that is there but cannot be used; the message names the file and why."""


def read_record(out: str | Path, kind: ShardKind) -> FetchRecord | None:
    """The fetch record of ``kind`` under ``out``, or None when there is none; a record that is
    there but unreadable raises :class:`RecordError` (reporting it as absent sent the user
    looking for a file that exists)."""
    path = record_path(out, kind)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: fetch record cannot be read ({type(e).__name__}: {e})") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise RecordError(f"{path}: fetch record is not valid JSON ({e}); run the same `data fetch` again "
                          "to rewrite it") from None
    fields = ("repo", "revision", "commit", "manifest", "target")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in fields):
        raise RecordError(f"{path}: fetch record needs the text fields {', '.join(fields)}; run the same "
                          "`data fetch` again to rewrite it")
    o = Path(out).resolve()
    return FetchRecord(kind=kind, repo=data["repo"], revision=data["revision"], commit=data["commit"],
                       manifest=str(o / data["manifest"]), target=str(o / data["target"]))


def read_extracted(out: str | Path, kind: ShardKind) -> dict[str, dict[str, Any]]:
    """The last extraction row per shard file (torn lines are skipped)."""
    rows: dict[str, dict[str, Any]] = {}
    for row in read_rows(extracted_log(out, kind)):
        if isinstance(row.get("file"), str):
            rows[row["file"]] = row
    return rows


def log_extracted(out: str | Path, kind: ShardKind, row: dict[str, Any]) -> None:
    append_rows(extracted_log(out, kind), [row], fsync=True)


def is_extracted(row: dict[str, Any] | None, sha256: str, target: Path, out: Path) -> bool:
    """A shard is done when its row has this sha256 and was extracted into this target."""
    if not row or row.get("sha256") != sha256 or not isinstance(row.get("target"), str):
        return False
    return bool((out.resolve() / str(row["target"])).resolve() == target.resolve())


def count_videos(target: str | Path, marker: str) -> tuple[int, list[str]]:
    """Video folders directly under ``target``, and those among them without ``marker``."""
    n, incomplete = 0, []
    try:
        it = os.scandir(target)
    except FileNotFoundError:
        return 0, []
    with it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                n += 1
                if not os.path.isfile(os.path.join(e.path, marker)):
                    incomplete.append(e.name)
    return n, sorted(incomplete)
