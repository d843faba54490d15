"""Typed result records: ``ScoreRow``, ``GenRow``, ``ErrorRow`` (docs/ARCHITECTURE.md, "Records").

A row is one JSON object per line of a step's (or condition's) JSONL file. On disk it stays the
flat object every earlier version wrote, so old files read unchanged; in memory it is a frozen
record whose typed fields are the ones the rules read (item, step, hash, removal, margin,
error kind). ``fields`` keeps the row as written (the evidence: permutations, log-probs, picks),
so nothing is lost by a round trip.

``schema_version`` is checked on read: a row without it, or with an older version, is read (and
migrated when a later version needs it); a newer one is an error naming the file and line,
never a silent misreading. A new optional field keeps the version (rows without it read as None,
and an older reader keeps it in ``fields``); renaming, removing or changing the meaning of a
field raises it, with a migration. Rows are written and read only through ``benchcheck.store``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1
NA = "NA"  # a generation row's ``parse_status`` when its condition does not apply to the item


class RowSchemaError(ValueError):
    """A row written by a newer benchcheck (or not a row at all)."""


def _margin(d: Mapping[str, Any]) -> float | None:
    """The deciding margin: step 1's mean over permutations, or the single forward's margin."""
    v = d.get("mean_margin", d.get("margin"))
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _tokens(d: Mapping[str, Any]) -> tuple[int, ...]:
    v = d.get("prompt_tokens")
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    if isinstance(v, list):
        return tuple(int(x) for x in v if isinstance(x, int | float) and not isinstance(x, bool))
    return ()


# What a compact reader keeps of a row's fields (accounting), besides the typed fields.
COMPACT_FIELDS = ("prompt_tokens", "latency_s")


class _RowView:
    """Read access to the row as written (``row["lp"]``), for evidence the typed fields leave out."""

    fields: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {**self.fields, "schema_version": SCHEMA_VERSION}

    @property
    def item_hash(self) -> str | None:
        """The fingerprint of the item as it was asked (``Item.fingerprint``); None in rows
        written before rows carried it (such rows are not judged by it)."""
        v = self.fields.get("item_hash")
        return None if v is None else str(v)

    @property
    def engine_config_hash(self) -> str | None:
        """The hash of the engine's configuration (``HFConfig.hash``), where the engine has one
        (optional, since issue 42: rows of other engines and older rows have none)."""
        v = self.fields.get("engine_config_hash")
        return None if v is None else str(v)


@dataclass(frozen=True, slots=True)
class ScoreRow(_RowView):
    """An ok row of letter scoring: one forward, or N permutations (step 1)."""

    item_id: str
    bench: str | None
    step: int | str | None
    config_hash: str | None
    removed: bool
    margin: float | None
    model: str | None
    fields: Mapping[str, Any]

    @property
    def prompt_tokens(self) -> tuple[int, ...]:
        """Per forward (read when asked: most readers never need it)."""
        return _tokens(self.fields)

    @property
    def forwards(self) -> int:
        return max(1, len(self.prompt_tokens))


@dataclass(frozen=True, slots=True)
class GenRow(_RowView):
    """An ok row of generation: the text, the parsed answer and how parsing went (the sweep).

    ``step`` is the condition's name; ``parse_status`` is ``ok``, ``unparsed`` or ``NA`` (the
    condition does not apply: no text, no answer). Every one of them is an answer that settles
    the item under its ``config_hash``; engine failures are ``ErrorRow``s."""

    item_id: str
    bench: str | None
    step: int | str | None
    config_hash: str | None
    text: str
    parsed: str | None
    parse_status: str
    correct: bool | None
    model: str | None
    fields: Mapping[str, Any]

    @property
    def removed(self) -> bool:
        return False  # generation decides correctness, not removal

    @property
    def margin(self) -> float | None:
        return None

    @property
    def prompt_tokens(self) -> tuple[int, ...]:
        return _tokens(self.fields)

    @property
    def forwards(self) -> int:
        return 1

    @property
    def na(self) -> bool:
        """The condition does not apply to the item (the sweep's ``NA``: a final answer, not an error)."""
        return self.parse_status == NA

    @property
    def reused_from(self) -> str | None:
        """The condition whose answer this row repeats (the sweep's reuse rule), or None."""
        meta = self.fields.get("meta")
        src = meta.get("reused_from") if isinstance(meta, Mapping) else None
        return None if src is None else str(src)


@dataclass(frozen=True, slots=True)
class ErrorRow(_RowView):
    """A request that gave no answer. ``retry_free``: the server was unreachable or refused the
    run's key or model; kept and reported, but it does not use up the item's retries."""

    item_id: str
    bench: str | None
    step: int | str | None
    config_hash: str | None
    error_kind: str
    error_status: int | None
    error: str
    retry_free: bool
    fields: Mapping[str, Any]


Record = ScoreRow | GenRow | ErrorRow

# Migrations from an older schema_version to the next one: {old: function(row) -> row}. Version 1
# is the first: rows without ``schema_version`` were written by the same code and read as 1.
_MIGRATIONS: dict[int, Any] = {}


def _version(d: Mapping[str, Any], where: str) -> int:
    v = d.get("schema_version", 1)
    if v == SCHEMA_VERSION and type(v) is int:
        return v
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise RowSchemaError(f"{where}schema_version {v!r} is not a positive integer")
    if v > SCHEMA_VERSION:
        raise RowSchemaError(f"{where}row schema_version {v} is newer than this benchcheck reads "
                             f"({SCHEMA_VERSION}); upgrade benchcheck to read these results")
    return v


def parse_row(d: Mapping[str, Any], where: str = "") -> Record | None:
    """The typed record of a row as read from disk; None for a row without an item id."""
    iid = d.get("item_id")
    if iid is None:
        return None
    v = _version(d, where)
    fields = d  # not copied: a million-row step is read through here
    while v < SCHEMA_VERSION:
        fields, v = _MIGRATIONS[v](fields), v + 1
    item_id, bench, step = str(iid), _opt_str(fields.get("bench")), _step(fields.get("step"))
    chash = _opt_str(fields.get("config_hash"))
    if fields.get("status", "ok") != "ok":
        status = fields.get("error_status")
        return ErrorRow(item_id, bench, step, chash, error_kind=str(fields.get("error_kind") or fields.get("status")),
                        error_status=status if isinstance(status, int) else None,
                        error=str(fields.get("error", "")), retry_free=bool(fields.get("retry_free")), fields=fields)
    if "text" in fields and "lp" not in fields:
        correct = fields.get("correct")
        return GenRow(item_id, bench, step, chash, text=str(fields.get("text") or ""),
                      parsed=_opt_str(fields.get("parsed")), parse_status=str(fields.get("parse_status") or "unknown"),
                      correct=correct if isinstance(correct, bool) else None, model=_opt_str(fields.get("model")),
                      fields=fields)
    return ScoreRow(item_id, bench, step, chash, removed=bool(fields.get("removed")), margin=_margin(fields),
                    model=_opt_str(fields.get("model")), fields=fields)


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _step(v: Any) -> int | str | None:
    return v if isinstance(v, int | str) and not isinstance(v, bool) else None


def score_row(fields: Mapping[str, Any]) -> ScoreRow:
    """A new ok score row from its fields (the builder in ``screen.rows`` makes the fields)."""
    rec = parse_row({**fields, "schema_version": SCHEMA_VERSION})
    assert isinstance(rec, ScoreRow), fields
    return rec


def error_record(fields: Mapping[str, Any]) -> ErrorRow:
    rec = parse_row({**fields, "schema_version": SCHEMA_VERSION})
    assert isinstance(rec, ErrorRow), fields
    return rec


def gen_row(fields: Mapping[str, Any]) -> GenRow:
    rec = parse_row({**fields, "schema_version": SCHEMA_VERSION})
    assert isinstance(rec, GenRow), fields
    return rec
