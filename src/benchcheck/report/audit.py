"""The audit section: the tables `benchcheck audit` wrote (the permutation null per benchmark x
step, and the removal rate against the threshold), shown as they are; a missing folder or table
gives a reason to show, never an exception."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

TABLES = (("audit_null.csv", "Removal rule against the permutation null (gold permuted within the benchmark)"),
          ("audit_thresholds.csv", "Removal rate against the margin threshold (0-3 nats)"))


@dataclass(frozen=True, slots=True)
class AuditTable:
    name: str
    title: str
    header: list[str]
    rows: list[list[str]]


@dataclass(slots=True)
class AuditData:
    folder: Path | None
    reason: str | None = None
    tables: list[AuditTable] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return bool(self.tables)


def read_audit(folder: Path | None) -> AuditData:
    if folder is None:
        return AuditData(None, "no audit folder given (--audit)")
    data = AuditData(folder)
    for name, title in TABLES:
        try:
            with (folder / name).open(newline="", encoding="utf-8", errors="replace") as f:
                rows = list(csv.reader(f))
        except OSError:
            continue
        if rows:
            data.tables.append(AuditTable(name, title, rows[0], rows[1:]))
    if not data.tables:
        data.reason = f"no audit tables in {folder} (expected {', '.join(n for n, _ in TABLES)})"
    return data
