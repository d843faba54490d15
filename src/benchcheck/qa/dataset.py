"""The QA dataset (SPEC section 6): a JSON list in the VSS evaluation format.

Each entry has ``id``, ``query`` (or ``question``), ``ground_truth``, ``evaluation_method`` (a
list such as ``["qa"]`` or ``["report"]``) and ``video`` (a path under the videos folder).

Problems are kept at the level where they are:

- *dataset* problems stop the run before anything is asked (:class:`DatasetError`, exit 2): the
  file cannot be read, it is not a JSON list, or it holds no runnable qa item at all;
- an entry that is not a qa entry (its ``evaluation_method`` does not name ``"qa"``, it is not
  an object, it has no text ``ground_truth``) is *skipped* with its reason, whatever else is
  wrong with it (a ``report`` entry without an ``id`` is skipped, not an error);
- a qa entry that cannot run (no or duplicate ``id``, an ``evaluation_method`` that is not a
  list of strings, no question, no video, a video path that leaves the videos folder) is an
  *item error*: counted and listed in ``summary.json``, the run goes on, and it ends with exit 3.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from benchcheck.qa.errors import PreconditionError

# Skip reasons, counted in summary.json.
SKIP_NO_METHOD = "no_evaluation_method"
SKIP_NOT_QA = "not_qa"
SKIP_NO_TEXT_GROUND_TRUTH = "no_text_ground_truth"
SKIP_NOT_OBJECT = "not_an_object"
SKIP_BAD_METHOD = "invalid_evaluation_method"
SKIP_NO_CLIP = "no_clip_named"  # a downloaded dataset's qa item that names no clip (a clarification test)

VIDEO_SUFFIXES = frozenset({".mp4", ".mkv", ".mov", ".avi", ".webm"})
# Fields a downloaded dataset's item may name its clip in, before its expected tool calls and its query.
CLIP_KEYS = ("video", "video_file", "video_name", "sensor", "sensor_id", "media")

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


def video_problem(item: QAItem) -> str | None:
    """Why ``item``'s clip cannot be sent (None: it is a file). A folder is named as one: "not
    found" sent the user looking for a path that is there."""
    if item.video_path.is_file():
        return None
    if item.video_path.is_dir():
        return f"video {item.video} is a folder, not a video file"
    return f"video not found: {item.video}"


@dataclass(frozen=True, slots=True)
class EntryNote:
    """One entry that is not run: its position, its id when it has one, and why (a skip
    reason code, or an item error's one-line message)."""

    entry: int
    id: str | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "id": self.id, "why": self.why}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EntryNote:
        return cls(int(d["entry"]), None if d.get("id") is None else str(d["id"]), str(d["why"]))


@dataclass(frozen=True, slots=True)
class Dataset:
    """Runnable items in file order, skip counts by reason, the entries skipped and the qa
    entries that cannot run (item errors), and the number of entries read."""

    path: Path
    items: list[QAItem]
    skipped: dict[str, int] = field(default_factory=dict)
    total: int = 0
    skipped_entries: list[EntryNote] = field(default_factory=list)
    entry_errors: list[EntryNote] = field(default_factory=list)


def safe_video_path(videos_root: Path, rel: str) -> Path:
    """``videos_root / rel``, refusing absolute paths and paths that climb out of the root (the
    items' rule: ``video.resolve.confined_path``)."""
    from benchcheck.video.resolve import confined_path

    return confined_path(videos_root, rel)


def _item_id(raw: Any) -> str | None:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    text = str(raw).strip()
    return text or None


def _claims_qa(methods: Any) -> bool:
    """Whether an entry asks to be run as qa, however badly its ``evaluation_method`` is shaped
    (``"qa"`` as a string, a list holding non-strings)."""
    if isinstance(methods, str):
        return "qa" in re.split(r"[\s,;|]+", methods.strip().lower())
    if isinstance(methods, list):
        return "qa" in methods
    return False


def _skip_reason(entry: Any) -> str | None:
    """Why an entry is not a qa entry to run (``None``: it is one)."""
    if not isinstance(entry, dict):
        return SKIP_NOT_OBJECT
    methods = entry.get("evaluation_method")
    if not _claims_qa(methods):
        if not methods:
            return SKIP_NO_METHOD
        if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
            return SKIP_BAD_METHOD
        return SKIP_NOT_QA
    gt = entry.get("ground_truth")
    if not isinstance(gt, str) or not gt.strip():
        return SKIP_NO_TEXT_GROUND_TRUTH
    return None


class ClipIndex:
    """The clips of a downloaded dataset's flat ``videos/`` folder, by file name and by stem, for
    items that name their clip without a path (the VSS datasets have no ``video`` field)."""

    def __init__(self, videos_root: Path) -> None:
        self.by_name: dict[str, str] = {}
        for p in sorted(videos_root.iterdir()) if videos_root.is_dir() else []:
            if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES:
                self.by_name.setdefault(p.stem, p.name)
                self.by_name[p.name] = p.name
        stems = {Path(n).stem for n in self.by_name.values()}
        self.stems = sorted(stems, key=lambda s: (-len(s), s))  # longest first: "a_10" before "a_1"

    def lookup(self, raw: str) -> str | None:
        raw = raw.strip()
        for token in (raw, PurePosixPath(raw).name, PurePosixPath(raw).stem):
            if token in self.by_name:
                return self.by_name[token]
        return None

    def resolve(self, entry: dict[str, Any], question: str) -> str | None:
        """The clip an item names: a clip field, then its expected tool calls' ``sensor_id``, then a
        clip name written in its query as a word of its own; the only clip when there is one."""
        for key in CLIP_KEYS:
            raw = entry.get(key)
            if isinstance(raw, str) and raw.strip() and (hit := self.lookup(raw)) is not None:
                return hit
        steps = entry.get("trajectory_ground_truth")
        for step in steps if isinstance(steps, list) else []:
            params = step.get("params") if isinstance(step, dict) else None
            for key in ("sensor_id", "sensor", "video"):
                raw = params.get(key) if isinstance(params, dict) else None
                if isinstance(raw, str) and raw.strip() and (hit := self.lookup(raw)) is not None:
                    return hit
        for stem in self.stems:
            if re.search(rf"(?<![\w.-]){re.escape(stem)}(?![\w-])", question):
                return self.by_name[stem]
        return self.by_name[self.stems[0]] if len(self.stems) == 1 else None


def _qa_item(entry: dict[str, Any], iid: str | None, videos_root: Path,
             clips: ClipIndex | None = None) -> QAItem | str | None:
    """The runnable item of a qa entry, or the one-line reason it cannot run (``None``: a
    downloaded dataset's item that names no clip, skipped)."""
    if iid is None:
        return "missing or invalid 'id' (a non-empty string or integer)"
    methods = entry.get("evaluation_method")
    if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
        return f"'evaluation_method' must be a list of strings, got {methods!r:.80}"
    question = entry.get("query", entry.get("question"))
    if not isinstance(question, str) or not question.strip():
        return "a qa item needs a text 'query' (or 'question')"
    video = entry.get("video")
    if clips is not None and not (isinstance(video, str) and (videos_root / video).is_file()):
        video = clips.resolve(entry, question)
        if video is None:
            return None
    if not isinstance(video, str) or not video.strip():
        return "a qa item needs 'video', a path under the videos folder"
    try:
        path = safe_video_path(videos_root, video)
    except ValueError as e:
        return str(e)
    return QAItem(iid, question, str(entry["ground_truth"]), video, path, tuple(methods))


def parse_dataset(data: Any, path: Path, videos_root: Path, clips: ClipIndex | None = None) -> Dataset:
    """Sort decoded JSON into runnable items, skipped entries and item errors; raises
    :class:`DatasetError` only when it is not a list or nothing at all can run. With ``clips`` (a
    downloaded dataset), an item without a usable ``video`` is matched to a clip by name."""
    if not isinstance(data, list):
        raise DatasetError(path, [f"expected a JSON list of items, got a JSON {type(data).__name__}"])
    items: list[QAItem] = []
    skipped: Counter[str] = Counter()
    skipped_entries: list[EntryNote] = []
    errors: list[EntryNote] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(data):
        iid = _item_id(entry.get("id")) if isinstance(entry, dict) else None
        first = seen.setdefault(iid, i) if iid is not None else i
        reason = _skip_reason(entry)
        if reason is not None:
            skipped[reason] += 1
            skipped_entries.append(EntryNote(i, iid, reason))
            continue
        assert isinstance(entry, dict)
        got = (_qa_item(entry, iid, videos_root, clips) if first == i
               else f"duplicate id {iid!r} (first at entry {first})")
        if got is None:
            skipped[SKIP_NO_CLIP] += 1
            skipped_entries.append(EntryNote(i, iid, SKIP_NO_CLIP))
            continue
        if isinstance(got, QAItem):
            items.append(got)
        else:
            errors.append(EntryNote(i, iid, got))
    if not items:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(skipped.items())) or "the list is empty"
        problems = [f"entry {e.entry}" + (f" (id {e.id})" if e.id else "") + f": {e.why}" for e in errors]
        raise DatasetError(path, [f"no runnable qa item ({reasons}"
                                  + (f", {len(errors)} qa entries that cannot run" if errors else "") + ")",
                                  *problems])
    return Dataset(path, items, dict(sorted(skipped.items())), len(data), skipped_entries, errors)


def load_dataset(path: str | Path, videos_root: str | Path, match_clips: bool = False) -> Dataset:
    """Read and validate a dataset file; every failure is a :class:`DatasetError`. ``match_clips``:
    a downloaded dataset whose items name their clip in ``videos_root`` by name (:class:`ClipIndex`)."""
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
    except RecursionError:  # the C decoder's depth guard: a hostile or broken file, not a crash
        raise DatasetError(path, ["not a usable JSON list: nested too deep to decode"]) from None
    return parse_dataset(data, path, root, ClipIndex(root) if match_clips else None)
