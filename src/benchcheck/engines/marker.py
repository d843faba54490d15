"""The random-weight marker: what a checkpoint folder built here says about its own weights.

Every builder of a random-weight checkpoint writes ``benchcheck_random_weights.json`` into the
folder (and the same record under ``config.json``'s ``benchcheck_random_weights`` key, which
survives a copy of only the files ``from_pretrained`` reads). The ``hf`` engine records a loaded
marker in its rows' ``revision`` (``random-weights:<builder>-seed<seed>``), so the report labels
the rows as noise from what the checkpoint says, never from the model's name: a real model may
well be called "tiny".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = "benchcheck_random_weights.json"
CONFIG_KEY = "benchcheck_random_weights"
REVISION_PREFIX = "random-weights"


def marker_record(builder: str, seed: int) -> dict[str, Any]:
    return {"random_weights": True, "builder": builder, "seed": seed,
            "note": "random weights built by BenchCheck for tests and benchmarks: its answers are noise"}


def write_marker(folder: Path, record: dict[str, Any]) -> None:
    from benchcheck.atomic import write_text_atomic

    write_text_atomic(Path(folder) / MARKER, json.dumps(record, sort_keys=True, indent=2) + "\n")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_marker(folder: Path | str) -> dict[str, Any] | None:
    """The folder's random-weight record: the marker file, else ``config.json``'s key; None for a
    folder that says nothing (a real checkpoint) or is not a folder."""
    folder = Path(folder)
    try:
        if not folder.is_dir():
            return None
    except OSError:
        return None
    config = _json(folder / "config.json")
    for rec in (_json(folder / MARKER), config.get(CONFIG_KEY) if isinstance(config, dict) else None):
        if isinstance(rec, dict) and rec.get("random_weights") is True:
            return rec
    return None


def marker_revision(record: dict[str, Any]) -> str:
    """The revision rows record for a random-weight checkpoint."""
    return f"{REVISION_PREFIX}:{record.get('builder', 'unknown')}-seed{record.get('seed', '?')}"


def is_random_revision(revision: str | None) -> bool:
    return bool(revision) and str(revision).startswith(REVISION_PREFIX)
