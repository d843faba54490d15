"""The audit section: the tables `benchcheck audit` wrote (the permutation null per benchmark x
step, the removal rate against the threshold, and, on the demo, the checks against the ground
truth), shown as they are, with the audit's one-sentence reading; and the per-item confidence
the item browser shows. A missing folder or table gives a reason to show, never an exception."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TABLES = (("audit_null.csv", "Removal rule against the permutation null (gold permuted within the benchmark)"),
          ("audit_thresholds.csv", "Removal rate against the margin threshold (0-3 nats)"),
          ("audit_truth.csv", "The audit checked against the ground truth (demo: false removals known by "
                              "construction; see audit_truth.md)"))
ITEMS = "audit_items.csv"
NOTE_CHARS = 40  # a repeated cell longer than this is said once, under its table

Confidences = dict[str, dict[int, float]]  # item_id -> step -> confidence


@dataclass(frozen=True, slots=True)
class AuditTable:
    name: str
    title: str
    header: list[str]
    rows: list[list[str]]
    notes: tuple[str, ...] = ()  # columns with one value in every row, said once under the table


def _table(name: str, title: str, rows: list[list[str]]) -> AuditTable:
    """A CSV table as shown: a long column that repeats one value (the rule) becomes a note."""
    header, body = rows[0], [r + [""] * (len(rows[0]) - len(r)) for r in rows[1:]]
    same = [j for j in range(len(header))
            if body and len({r[j] for r in body}) == 1 and len(body[0][j]) > NOTE_CHARS]
    notes = tuple(f"{header[j]}: {body[0][j]}" for j in same)
    keep = [j for j in range(len(header)) if j not in same]
    return AuditTable(name, title, [header[j] for j in keep], [[r[j] for j in keep] for r in body], notes)


@dataclass(slots=True)
class AuditData:
    folder: Path | None
    reason: str | None = None
    tables: list[AuditTable] = field(default_factory=list)
    headline: str | None = None  # audit.md's reading of the null, one sentence
    truth: str | None = None  # audit_truth.md's result line
    label: str = ""

    @property
    def available(self) -> bool:
        return bool(self.tables)


def _bold_line(path: Path) -> str | None:
    """The first line of a Markdown file that is bold on its own (the file's reading)."""
    try:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("**") and line.endswith("**"):
                return line.strip("*").strip()
    except OSError:
        return None
    return None


def read_audit(folder: Path | None) -> AuditData:
    if folder is None:
        return AuditData(None, "no audit folder given (--audit)")
    data = AuditData(folder, label=folder.name)
    for name, title in TABLES:
        try:
            with (folder / name).open(newline="", encoding="utf-8", errors="replace") as f:
                rows = list(csv.reader(f))
        except OSError:
            continue
        if rows:
            data.tables.append(_table(name, title, rows))
    data.headline = _bold_line(folder / "audit.md")
    data.truth = _bold_line(folder / "audit_truth.md")
    if not data.tables:
        data.reason = f"no audit tables in {folder} (expected {', '.join(n for n, _ in TABLES[:2])})"
    return data


def read_audits(folders: Iterable[Path]) -> list[AuditData]:
    return [read_audit(f) for f in folders]


def read_confidences(folder: Path | None) -> Confidences:
    """Per item and step, the audit's confidence in the recorded decision (``audit_items.csv``);
    empty when there is no audit or no such table, and a malformed row is skipped."""
    out: Confidences = {}
    if folder is None:
        return out
    try:
        with (folder / ITEMS).open(newline="", encoding="utf-8", errors="replace") as f:
            for row in csv.DictReader(f):
                try:
                    value = float(row["confidence"])
                    out.setdefault(str(row["item_id"]), {})[int(row["step"])] = value
                except (KeyError, TypeError, ValueError):
                    continue
    except OSError:
        return {}
    return out
