"""The one reducer from an item's rows at one step (or condition) to its ``ItemVerdict``.

Every reader of results decides through here: the planner, the fates that ``assemble``
tabulates, the pack's returns report, the sweep and later reports. The rules (docs/PROTOCOL.md,
"Results"):

- the last ok row of an item decides; a row without ``status`` is ok;
- an item without an ok row and with ``MAX_ERRORS_PER_ITEM`` error rows that count is
  permanently failed; a ``retry_free`` error row (server unreachable, key or model refused)
  is kept and reported but does not count;
- a row whose ``config_hash`` differs from the step's current one is stale: reported, never
  done, never counted toward failure; so is a row whose ``item_hash`` differs from the item's
  fingerprint now (the item was edited since: another question, option or gold), where the reader
  knows the items.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from benchcheck.records import COMPACT_FIELDS, ErrorRow, GenRow, Record, ScoreRow, parse_row

MAX_ERRORS_PER_ITEM = 3

Status = Literal["kept", "removed", "failed", "error", "pending"]
OkRow = ScoreRow | GenRow
# (bench, item id) -> the item's fingerprint now (``items.fingerprints``).
ItemHashes = Mapping[tuple[str, str], str]


@dataclass(frozen=True, slots=True)
class ItemVerdict:
    """What an item's rows at one step say."""

    item_id: str
    status: Status  # error: error rows but retries left; pending: no current row at all
    row: OkRow | None  # the deciding ok row
    error_rows: int
    counted_errors: int
    stale_rows: int

    @property
    def done(self) -> bool:
        return self.status in ("kept", "removed")

    @property
    def removed(self) -> bool:
        return self.status == "removed"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def touched(self) -> bool:
        """Some current row (ok or error) exists for the item."""
        return self.row is not None or self.error_rows > 0

    @property
    def retry_free_errors(self) -> int:
        return self.error_rows - self.counted_errors

    @property
    def margin(self) -> float | None:
        return self.row.margin if self.row is not None else None

    @property
    def stale(self) -> bool:
        """Only stale rows stand for the item: it is to be asked again under the current spec."""
        return self.stale_rows > 0 and self.row is None


@dataclass(slots=True)
class StepState:
    """The reducer's accumulator over one step's rows (fed in file order).

    ``expect_hash``: the step's current ``config_hash`` (None: not judged, e.g. a folder written
    before ``run_spec.json`` existed). ``expect_items``: the items' fingerprints now (None: rows
    are not judged by them, for a reader without the items); an item it does not name, and a
    row without ``item_hash``, are not judged either. ``compact`` drops each ok row's evidence and keeps only
    the typed fields and ``records.COMPACT_FIELDS``: a million-row step is counted without
    holding its log-probs.
    """

    ok: dict[str, OkRow] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # every current error row
    counted: dict[str, int] = field(default_factory=dict)  # current error rows that count toward the limit
    stale: dict[str, int] = field(default_factory=dict)  # rows under another config_hash, or of the item before an edit
    stale_hash: dict[str, str] = field(default_factory=dict)  # the last of them: what changed is told from it
    edited: set[str] = field(default_factory=set)  # items with a row of the item as it was before an edit
    last_error: dict[str, ErrorRow] = field(default_factory=dict)  # why an item has no answer, when it has none
    max_errors: int = MAX_ERRORS_PER_ITEM
    expect_hash: str | None = None
    compact: bool = False
    expect_items: ItemHashes | None = None

    def add(self, row: Record | Mapping[str, Any]) -> None:
        rec = row if isinstance(row, ScoreRow | GenRow | ErrorRow) else parse_row(row)
        if rec is None:
            return
        iid = rec.item_id
        if self.expect_hash is not None and rec.config_hash is not None and rec.config_hash != self.expect_hash:
            self.stale[iid] = self.stale.get(iid, 0) + 1
            self.stale_hash[iid] = rec.config_hash
            return
        if self.expect_items is not None and rec.item_hash is not None \
                and self.expect_items.get((rec.bench or "", iid), rec.item_hash) != rec.item_hash:
            self.stale[iid] = self.stale.get(iid, 0) + 1
            self.edited.add(iid)
            return
        if isinstance(rec, ErrorRow):
            self.errors[iid] = self.errors.get(iid, 0) + 1
            self.last_error[iid] = rec
            if not rec.retry_free:
                self.counted[iid] = self.counted.get(iid, 0) + 1
            return
        if self.compact:
            rec = replace(rec, fields={k: rec.fields[k] for k in COMPACT_FIELDS if k in rec.fields})
        self.ok[iid] = rec

    def add_all(self, rows: Iterable[Record | Mapping[str, Any]]) -> StepState:
        for r in rows:
            self.add(r)
        return self

    def verdict(self, item_id: str) -> ItemVerdict:
        row = self.ok.get(item_id)
        n_err, n_counted = self.errors.get(item_id, 0), self.counted.get(item_id, 0)
        status: Status
        if row is not None:
            status = "removed" if row.removed else "kept"
        elif n_counted >= self.max_errors:
            status = "failed"
        else:
            status = "error" if n_err else "pending"
        return ItemVerdict(item_id, status, row, n_err, n_counted, self.stale.get(item_id, 0))

    def item_ids(self) -> set[str]:
        return set(self.ok) | set(self.errors) | set(self.stale)

    def verdicts(self) -> Iterator[ItemVerdict]:
        for iid in sorted(self.item_ids()):
            yield self.verdict(iid)

    # Shorthands over ``verdict`` (the planner's questions).
    def touched(self, item_id: str) -> bool:
        return self.verdict(item_id).touched

    def is_done(self, item_id: str) -> bool:
        return self.verdict(item_id).done

    def is_failed(self, item_id: str) -> bool:
        return self.verdict(item_id).failed

    def is_removed(self, item_id: str) -> bool:
        return self.verdict(item_id).removed

    def failed_ids(self) -> list[str]:
        return sorted(i for i in self.errors if self.is_failed(i))

    def stale_ids(self) -> list[str]:
        return sorted(i for i in self.stale if self.verdict(i).stale)
