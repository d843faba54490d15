"""The sweep's reducer: what the rows already written say about each (bench, item, condition).

Per (bench, condition) group, one ``verdicts.StepState`` judged by the condition's current
``config_hash`` (the same rules as every screening step: the last answer decides, a row under
another hash is stale and redone, ``MAX_ERRORS_PER_ITEM`` counted engine errors give the item up).
It is fed the group's typed rows (``sweep_rows/<condition>/<bench>.jsonl``, through ``store``)
and the rows of ``conditions_results.csv`` read as records (``sweep.rows.record_of_csv``): rows
of folders made before the typed rows existed (ours: judged by their ``config_hash``, like any
row) and the origin's rows (a file not written by benchcheck: not judged, done as seed 001 asks;
read only for items the typed rows do not mention, so our rows copied into such a file never
stand for themselves). An error row of the CSV counts toward giving its item up only where the
typed rows do not mention the item: our runs write one error row per failed cell from the typed
rows, which already count each error. That reading is the migration: nothing is rewritten.

Why a row is stale is told from the specs the rows were made under (``run_specs.jsonl`` beside
them): the fields that differ, e.g. ``frames.token_budget 30000 -> 58000``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchcheck.records import ErrorRow, GenRow
from benchcheck.spec import RunSpec
from benchcheck.store import append_rows, read_records, read_rows
from benchcheck.sweep.results import (
    KEY,
    ROWS_DIR,
    Key,
    SweepPaths,
    csv_lacks,
    current_hashes,
    latest,
    read_csv_table,
    row_status,
    settles,
)
from benchcheck.sweep.rows import csv_standing, record_of_csv
from benchcheck.verdicts import ItemHashes, StepState

SPECS_FILE = "run_specs.jsonl"


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def spec_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """``frames.token_budget 30000 -> 58000; model.revision a -> b`` (what shapes the answer and changed)."""
    # Compared as JSON holds them: a stored spec's tuples read back as lists.
    a, b = (_flat(json.loads(json.dumps(d, default=str))) for d in (old, new))
    keys = [k for k in dict.fromkeys([*a, *b]) if k != "config_hash" and a.get(k) != b.get(k)]
    return "; ".join(f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in keys)


def _last_spec(paths: SweepPaths, condition: str) -> dict[str, Any] | None:
    """The spec of the condition's last run as ``p1_raw/<condition>/run_spec.json`` keeps it (folders
    made before ``run_specs.jsonl`` existed have only this one)."""
    try:
        d = json.loads((paths.results / "p1_raw" / condition / "run_spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and isinstance(d.get("config_hash"), str) else None


def record_specs(paths: SweepPaths, specs: Iterable[RunSpec]) -> None:
    """Every spec a condition's rows are made under, once per hash (so a later run can say what
    changed), the one of the last run first (before this run's replaces its ``run_spec.json``)."""
    for spec in specs:
        rows = [r for r in (_last_spec(paths, spec.name),) if r is not None]
        rows.append({**spec.to_dict(), "config_hash": spec.config_hash})
        append_rows(paths.rows_dir(spec.name) / SPECS_FILE, rows, unique_by=lambda r: r.get("config_hash"))


@dataclass(slots=True)
class SweepState:
    """The reducer of every group of a planned sweep (see the module doc)."""

    paths: SweepPaths
    specs: Mapping[str, RunSpec]
    groups: dict[tuple[str, str], StepState] = field(default_factory=dict)
    _history: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def group(self, bench: str, condition: str) -> StepState | None:
        return self.groups.get((bench, condition))

    def why_stale(self, condition: str, old_hash: str) -> str:
        if condition not in self._history:
            last = _last_spec(self.paths, condition)
            self._history[condition] = {str(r.get("config_hash")): r for r in
                                        [*read_rows(self.paths.rows_dir(condition) / SPECS_FILE),
                                         *([last] if last else [])]}
        new = self.specs[condition]
        old = self._history[condition].get(old_hash)
        if old is None:
            return f"made under config_hash {old_hash or '?'}, now {new.config_hash}"
        changed = spec_diff(old, new.to_dict())
        return f"made under config_hash {old_hash}, now {new.config_hash}: {changed or 'spec changed'}"


def group_state(paths: SweepPaths, bench: str, condition: str, expect_hash: str,
                items: ItemHashes | None = None) -> StepState:
    """A group's typed rows alone, through the reducer (read again under the group's lease);
    ``items``: the items' fingerprints now (a row of an item edited since is stale)."""
    return StepState(expect_hash=expect_hash, expect_items=items).add_all(read_records(paths.rows(condition, bench)))


def load_state(paths: SweepPaths, specs: Mapping[str, RunSpec], benches: Iterable[str],
               items: ItemHashes | None = None) -> SweepState:
    """The reducer over the typed rows and the CSV of a results folder, for these groups;
    ``items``: the items' fingerprints now (a row of an item edited since is stale)."""
    out = SweepState(paths, specs)
    benches = set(benches)
    csv_rows: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    table = read_csv_table(paths.csv)
    for r in table.rows:
        if r["bench"] in benches and r["condition"] in specs:
            csv_rows[(r["bench"], r["condition"])].append(r)
    for name, spec in specs.items():
        chash = spec.config_hash
        for bench in sorted(benches):
            state = group_state(paths, bench, name, chash, items)
            typed = state.item_ids()
            for r in csv_rows.get((bench, name), ()):
                rec = record_of_csv(r, table.ours)
                if isinstance(rec, ErrorRow) and rec.item_id in typed:
                    continue  # a copy of the typed error rows (``runner.write_records``): counted once
                if rec.config_hash is not None or rec.item_id not in typed:
                    state.add(rec)
            out.groups[(bench, name)] = state
    return out


def answer_of(state: SweepState, bench: str, condition: str, item_id: str) -> GenRow | None:
    """The answer that settles an item under its condition's current spec (``NA`` is no answer)."""
    g = state.group(bench, condition)
    row = g.verdict(item_id).row if g is not None else None
    return row if isinstance(row, GenRow) and not row.na else None


# failures.jsonl kinds of cells that get no typed row from runs made before those cells had one.
_LOGGED_KINDS = ("no_video", "frame_plan")


@dataclass(frozen=True, slots=True)
class Unsynced:
    """What a results folder's own records hold that its CSV lacks (:func:`unsynced`)."""

    errors: int = 0  # cells whose typed rows end in a failure the CSV's rows do not show
    logged: int = 0  # cells with a no-video / frame-plan line in failures.jsonl and no CSV row
    answers: int = 0  # cells whose typed answer the CSV lacks (a run killed between the two writes)
    first: Key | None = None  # the first failed cell, by key

    @property
    def failures(self) -> int:
        return self.errors + self.logged

    def line(self, paths: SweepPaths) -> str:
        """One line naming them ("" when none), for ``sweep analyze`` and the dry run."""
        if not self.failures and not self.answers:
            return ""
        where = [f"{n} in {what}" for n, what in ((self.errors + self.answers, f"{paths.results / ROWS_DIR}/"),
                                                  (self.logged, str(paths.failures))) if n]
        head = f"{_cells(self.failures)} failed" if self.failures else ""
        if self.answers:
            head += (" and " if head else "") + f"{_cells(self.answers)} answered"
        first = f"; first: {' '.join(self.first)}" if self.first else ""
        return (f"{head} by earlier runs {'are' if self.failures + self.answers > 1 else 'is'} not in "
                f"{paths.csv.name} yet ({', '.join(where)}{first}), so no count "
                "from that file includes them; the next `sweep run` on this folder writes them into it first")


def unsynced(paths: SweepPaths) -> Unsynced:
    """The cells whose count in the CSV the next ``sweep run`` of this folder changes before it asks
    anything (its ``sync_csv`` and ``write_static``), as far as the folder alone tells, without the
    items or the store: per condition, under the spec of its last run (``run_spec.json``), the CSV
    rows of its typed rows that the file lacks (``results.csv_lacks``, the appender's own rule),
    taken as the readers take rows (``results.latest``), and the ``no_video`` / ``frame_plan``
    lines of ``failures.jsonl`` (runs before such cells had rows) of keys with no CSV row under
    that spec. Only cells whose counted row would become an error (from an answer or none) or an
    answer count. An item edited or a video stored since is the run's to judge."""
    hashes = current_hashes(paths.results)
    typed: list[dict[str, str]] = []
    for condition, chash in hashes.items():
        for f in sorted(paths.rows_dir(condition).glob("*.jsonl")):
            if f.name != SPECS_FILE:
                typed += [csv_standing(r) for r in read_records(f)
                          if isinstance(r, GenRow | ErrorRow) and r.config_hash == chash]
    table = read_csv_table(paths.csv)
    have = table.rows
    lacking = [{k: str(v) for k, v in r.items()} for r in csv_lacks(table, typed)]
    errors: list[Key] = []
    answers = 0
    if lacking:
        now = {_key(r): r for r in latest(have, hashes)}
        added = {id(r) for r in lacking}
        for r in latest([*have, *lacking], hashes):
            if id(r) not in added:
                continue
            if settles(row_status(r)):
                answers += 1
            elif (held := now.get(_key(r))) is None or settles(row_status(held)):
                errors.append(_key(r))
    logs = [x for x in read_rows(paths.failures) if x.get("kind") in _LOGGED_KINDS
            and x.get("config_hash") == hashes.get(str(x.get("condition")))]
    under = {(*_key(r), r.get("config_hash") or "") for r in [*have, *lacking]} if logs else set()
    logged = {_key(x) for x in logs if (*_key(x), x.get("config_hash")) not in under}  # none among ``errors``
    failed = sorted({*errors, *logged})
    return Unsynced(len(errors), len(logged), answers, failed[0] if failed else None)


def _key(row: Mapping[str, Any]) -> Key:
    b, i, c = (str(row[k]) for k in KEY)
    return b, i, c


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"
