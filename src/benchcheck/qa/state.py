"""What a QA run keeps in its output folder so a killed run resumes without paying twice.

- ``run_config.json``: the settings, the selected items (question, reference, video) and the
  skip counts, so ``qa judge`` needs nothing but the folder.
- ``answers.jsonl``: one row per VLM call, appended as soon as it returns. Rows are keyed by
  the VLM configuration and the item's content; a rerun reuses ok rows and asks again for
  items whose last row is an error (an error row never counts as done).
- ``judge_cache.jsonl``: one row per verdict, keyed by judge model, prompt version and item
  (its question, reference and answer, masked: :func:`judge_key`); only ok verdicts are reused.

Both JSONL files are append-only through :func:`benchcheck.store.append_rows` (locked, torn
tails survived), and every row is redacted before it is written. One ``qa run`` or ``qa judge``
writes a folder at a time (:func:`folder_lease`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic
from benchcheck.lease import holder, try_lease
from benchcheck.masking import Masker
from benchcheck.qa.dataset import EntryNote, QAItem
from benchcheck.qa.errors import PreconditionError
from benchcheck.qa.records import Judgement, VLMAnswer
from benchcheck.store import append_rows, read_rows

RUN_CONFIG = "run_config.json"
ANSWERS = "answers.jsonl"
JUDGE_CACHE = "judge_cache.jsonl"


def digest(parts: Any) -> str:
    """A short stable hash of a JSON-serializable value."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]


def answer_key(vlm_config_hash: str, item: QAItem) -> str:
    return digest([vlm_config_hash, item.id, item.question, item.video])


def judge_key(judge_model: str, prompt_version: str, item: QAItem, answer: str, redactor: Masker) -> str:
    """The key of a verdict, over the item's text masked as the judge is sent it and as
    ``run_config.json`` stores it: ``qa run`` holds the question as asked, ``qa judge`` the
    question read back masked, and both must find the same verdict. Masking stored (already
    masked) text again leaves it as it is, and text without secrets keeps its earlier key."""
    return digest([judge_model, prompt_version,
                   *redactor.value([item.id, item.question, item.ground_truth, answer])])


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The stored description of a run: enough to rebuild its outputs and re-judge it."""

    vlm_config_hash: str
    settings: dict[str, Any]
    items: list[QAItem]
    dataset_entries: int
    skipped: dict[str, int]
    not_selected: int
    skipped_entries: list[EntryNote] = field(default_factory=list)
    entry_errors: list[EntryNote] = field(default_factory=list)
    # Per item id, the key its answers are stored under, as read back from run_config.json: the
    # items are stored masked there, so a question holding secret-shaped text no longer hashes to
    # the key ``qa run`` computed from the question as asked.
    answer_keys: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "vlm_config_hash": self.vlm_config_hash,
            "settings": self.settings,
            "dataset_entries": self.dataset_entries,
            "skipped": self.skipped,
            "not_selected": self.not_selected,
            "skipped_entries": [e.to_json() for e in self.skipped_entries],
            "entry_errors": [e.to_json() for e in self.entry_errors],
            "items": [{"id": i.id, "question": i.question, "ground_truth": i.ground_truth,
                       "video": i.video, "video_path": str(i.video_path),
                       "evaluation_method": list(i.evaluation_method),
                       "answer_key": self.answer_keys.get(i.id) or answer_key(self.vlm_config_hash, i)}
                      for i in self.items],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunConfig:
        items = [QAItem(str(i["id"]), i["question"], i["ground_truth"], i["video"], Path(i["video_path"]),
                        tuple(i.get("evaluation_method", ())))
                 for i in d["items"]]
        # Folders written before item-level dataset errors existed have neither list, and those
        # written before answer keys were stored have none (their keys are computed).
        keys = {str(i["id"]): i["answer_key"] for i in d["items"] if isinstance(i.get("answer_key"), str)}
        return cls(d["vlm_config_hash"], d["settings"], items, int(d["dataset_entries"]),
                   dict(d["skipped"]), int(d["not_selected"]),
                   [EntryNote.from_json(e) for e in d.get("skipped_entries", [])],
                   [EntryNote.from_json(e) for e in d.get("entry_errors", [])], keys)


@contextmanager
def folder_lease(out_dir: Path) -> Iterator[None]:
    """Hold the output folder for one ``qa run`` / ``qa judge`` (the lease of ``answers.jsonl``).

    Without it two runs started on the same folder (a second launch by mistake) each asked the
    VLM about every item and appended its answers and verdicts: every item twice, and the last
    one to finish rewrote the outputs from its own view. The second run now stops before it asks
    anything (a ``PreconditionError``, exit 2); the kernel drops the lease of a killed holder, so
    the next run resumes as before."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        lease = try_lease(out_dir / ANSWERS)
    except OSError as e:
        raise PreconditionError(f"output folder {out_dir}: {e}") from e
    if lease is None:
        who = holder(out_dir / ANSWERS)
        raise PreconditionError(f"output folder {out_dir}: another `benchcheck qa` run is writing it"
                                f"{f' ({who})' if who else ''}; wait for it to end, then run the same command "
                                "again (it resumes)")
    with lease:
        yield


def save_run_config(out_dir: Path, config: RunConfig, redactor: Masker) -> None:
    write_json_atomic(out_dir / RUN_CONFIG, redactor.value(config.to_json()), indent=2)


def load_run_config(out_dir: Path) -> RunConfig:
    """Raises ``ValueError`` naming the file when it is missing or unreadable."""
    path = out_dir / RUN_CONFIG
    try:
        return RunConfig.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ValueError(f"{path} not found: run `benchcheck qa run` into this folder first") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: unreadable run configuration ({e})") from e


class AnswerStore:
    """The VLM answers of one configuration, read from and appended to ``answers.jsonl``."""

    def __init__(self, out_dir: Path, vlm_config_hash: str, redactor: Masker,
                 keys: dict[str, str] | None = None) -> None:
        self.path = out_dir / ANSWERS
        self.config_hash = vlm_config_hash
        self.redactor = redactor
        self.keys = keys or {}  # item id -> stored answer key (RunConfig.answer_keys)

    def latest(self, items: list[QAItem]) -> dict[str, VLMAnswer]:
        """Per item id: its last ok answer, else its last error, for this configuration."""
        wanted = {self.keys.get(i.id) or answer_key(self.config_hash, i): i.id for i in items}
        ok: dict[str, VLMAnswer] = {}
        err: dict[str, VLMAnswer] = {}
        for row in read_rows(self.path):
            iid = wanted.get(str(row.get("key")))
            if iid is None:
                continue
            try:
                ans = VLMAnswer.from_row(row)
            except TypeError:
                continue
            (ok if ans.status == "ok" else err)[iid] = ans
        return {**err, **ok}

    def append(self, item: QAItem, answer: VLMAnswer) -> None:
        row = {"key": answer_key(self.config_hash, item), **answer.to_row()}
        append_rows(self.path, [self.redactor.value(row)])


class JudgeCache:
    """Ok verdicts keyed by :func:`judge_key`; every verdict (errors too) is appended for the record."""

    def __init__(self, out_dir: Path, redactor: Masker) -> None:
        self.path = out_dir / JUDGE_CACHE
        self.redactor = redactor

    def load(self) -> dict[str, Judgement]:
        hits: dict[str, Judgement] = {}
        for row in read_rows(self.path):
            if row.get("status") != "ok" or not isinstance(row.get("key"), str):
                continue
            try:
                hits[row["key"]] = Judgement.from_row(row)
            except TypeError:
                continue
        return hits

    def append(self, key: str, judgement: Judgement) -> None:
        append_rows(self.path, [self.redactor.value({"key": key, **judgement.to_row()})])
