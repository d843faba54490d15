"""The QA dataset (SPEC section 6): a JSON list in the VSS evaluation format.

Each entry has ``id``, ``query`` (or ``question``), ``ground_truth``, ``evaluation_method`` (a
list such as ``["qa"]`` or ``["report"]``) and ``video`` (a path under the videos folder).
Entries whose ``evaluation_method`` contains ``"qa"`` and that carry a text ``ground_truth``
are run; the others are counted as skipped by reason. A dataset that cannot be read safely
(not a JSON list, entries that are not objects, missing or duplicate ids, a runnable entry
without a question or video, a video path that leaves the videos folder) raises
:class:`DatasetError`, a failed precondition: the whole file is reported, nothing is run.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from benchcheck.qa.errors import PreconditionError

# Skip reasons, counted in summary.json.
SKIP_NO_METHOD = "no_evaluation_method"
SKIP_NOT_QA = "not_qa"
SKIP_NO_TEXT_GROUND_TRUTH = "no_text_ground_truth"

_MAX_REPORTED = 20


class DatasetError(PreconditionError):
    """The dataset file is unusable; ``problems`` holds one line per defect."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        shown = problems[:_MAX_REPORTED]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__(f"bad dataset {path}:\n  " + "\n  ".join(shown) + more)


@dataclass(frozen=True, slots=True)
class QAItem:
    """One runnable item: the question, its text reference and the clip it is asked about."""

    id: str
    question: str
    ground_truth: str
    video: str
    video_path: Path
    evaluation_method: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Dataset:
    """Runnable items in file order, skip counts by reason and the number of entries read."""

    path: Path
    items: list[QAItem]
    skipped: dict[str, int] = field(default_factory=dict)
    total: int = 0


def safe_video_path(videos_root: Path, rel: str) -> Path:
    """``videos_root / rel``, refusing absolute paths and paths that climb out of the root."""
    if not rel or "\x00" in rel:
        raise ValueError("empty video path")
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"video path {rel!r} leaves the videos folder")
    root = videos_root.resolve()
    path = (root / pure).resolve()
    # Symlinks inside the folder may still point outside it.
    if path != root and root not in path.parents:
        raise ValueError(f"video path {rel!r} resolves outside the videos folder")
    return path


def _item_id(raw: Any) -> str | None:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    text = str(raw).strip()
    return text or None


def _skip_reason(entry: dict[str, Any]) -> str | None:
    methods = entry.get("evaluation_method")
    if not methods:
        return SKIP_NO_METHOD
    if "qa" not in methods:
        return SKIP_NOT_QA
    gt = entry.get("ground_truth")
    if not isinstance(gt, str) or not gt.strip():
        return SKIP_NO_TEXT_GROUND_TRUTH
    return None


def _read_entry(i: int, entry: Any, videos_root: Path, problems: list[str]) -> QAItem | str | None:
    """A runnable item, a skip reason, or ``None`` after appending the entry's problems."""
    if not isinstance(entry, dict):
        problems.append(f"entry {i}: not a JSON object ({type(entry).__name__})")
        return None
    iid = _item_id(entry.get("id"))
    where = f"entry {i} (id {iid})" if iid else f"entry {i}"
    if iid is None:
        problems.append(f"{where}: missing or invalid 'id' (a non-empty string or integer)")
        return None
    methods = entry.get("evaluation_method")
    if methods is not None and (
        not isinstance(methods, list) or not all(isinstance(m, str) for m in methods)
    ):
        problems.append(f"{where}: 'evaluation_method' must be a list of strings, got {methods!r}")
        return None
    reason = _skip_reason(entry)
    if reason is not None:
        return reason
    question = entry.get("query", entry.get("question"))
    if not isinstance(question, str) or not question.strip():
        problems.append(f"{where}: a qa item needs a text 'query' (or 'question')")
        return None
    video = entry.get("video")
    if not isinstance(video, str) or not video.strip():
        problems.append(f"{where}: a qa item needs 'video', a path under the videos folder")
        return None
    try:
        path = safe_video_path(videos_root, video)
    except ValueError as e:
        problems.append(f"{where}: {e}")
        return None
    return QAItem(iid, question, str(entry["ground_truth"]), video, path, tuple(methods or ()))


def parse_dataset(data: Any, path: Path, videos_root: Path) -> Dataset:
    """Validate decoded JSON; raises :class:`DatasetError` listing every defect found."""
    if not isinstance(data, list):
        raise DatasetError(path, [f"expected a JSON list of items, got a JSON {type(data).__name__}"])
    problems: list[str] = []
    items: list[QAItem] = []
    skipped: Counter[str] = Counter()
    seen: dict[str, int] = {}
    for i, entry in enumerate(data):
        got = _read_entry(i, entry, videos_root, problems)
        iid = _item_id(entry.get("id")) if isinstance(entry, dict) else None
        if iid is not None:
            if iid in seen:
                problems.append(f"entry {i}: duplicate id {iid!r} (first at entry {seen[iid]})")
                continue
            seen[iid] = i
        if isinstance(got, QAItem):
            items.append(got)
        elif isinstance(got, str):
            skipped[got] += 1
    if problems:
        raise DatasetError(path, problems)
    if not items:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(skipped.items())) or "the list is empty"
        raise DatasetError(path, [f"no runnable qa item ({reasons})"])
    return Dataset(path, items, dict(sorted(skipped.items())), len(data))


def load_dataset(path: str | Path, videos_root: str | Path) -> Dataset:
    """Read and validate a dataset file; every failure is a :class:`DatasetError`."""
    path = Path(path)
    root = Path(videos_root)
    if not root.is_dir():
        raise DatasetError(path, [f"videos folder {root} does not exist"])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(path, [f"cannot read: {e}"]) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(path, [f"not valid JSON: {e}"]) from e
    return parse_dataset(data, path, root)
