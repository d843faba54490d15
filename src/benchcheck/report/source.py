"""The one place the report reads screening rows (an adapter).

Everything else in :mod:`benchcheck.report` works on the records below, built from the typed
records through ``store.load_state`` (the verdict reducer) + ``screen.fates.item_fates`` (the rules
`assemble` uses, so the report and ``pool_summary.md`` agree); the evidence shown is each
record's row as written (``Record.fields``). Benchmarks are read one at a time, so memory follows the largest benchmark,
not the pool.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.items import Item, fingerprints
from benchcheck.records import ErrorRow
from benchcheck.screen.assemble import sanity_flags, summary_rows
from benchcheck.screen.fates import NOT_REACHED, REMOVED, ItemFate, item_fates, pending_cause
from benchcheck.screen.plan import KeptList, load_keep
from benchcheck.store import StepStore, bench_of_file, read_records, read_rows
from benchcheck.sweep.results import condition_models
from benchcheck.verdicts import ItemHashes, StepState

PROVENANCE_KEYS = ("model", "revision", "engine", "config_hash", "intro", "host")


@dataclass(frozen=True, slots=True)
class ItemEvidence:
    """One item, its fate along the chain and the rows behind it (the ok row, else the last error)."""

    item: Item
    final: str
    removed_at: int | None
    fates: Mapping[int, str]
    margins: Mapping[int, float | None]
    rows: Mapping[int, Mapping[str, Any]]
    # a pending item's cause and the step it waits on (``screen.fates.pending_cause``)
    waiting: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class BenchEvidence:
    bench: str
    items: Sequence[ItemEvidence]
    summary: Sequence[Mapping[str, Any]]  # assemble's per-step rows for this benchmark
    flags: Sequence[str]


@dataclass(slots=True)
class StepProvenance:
    """What the rows of one step say about how they were made."""

    values: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    first_ts: float | None = None
    last_ts: float | None = None
    rows: int = 0
    _last: tuple[Any, ...] = ()

    def merge(self, other: StepProvenance) -> None:
        self.rows += other.rows
        for k, v in other.values.items():
            self.values[k] |= v
        for ts in (other.first_ts, other.last_ts):
            if ts is not None:
                self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
                self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        key = tuple(map(row.get, PROVENANCE_KEYS))
        if key != self._last:  # rows of one run repeat the same values: update the sets only on a change
            self._last = key
            for k, v in zip(PROVENANCE_KEYS, key, strict=True):
                if v is not None:
                    self.values[k].add(v if isinstance(v, str) else str(v))
        ts = row.get("ts")
        if isinstance(ts, int | float):
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts


def step_dir(results: Path, step: int) -> Path:
    return results / f"step{step}"


def benches_with_rows(results: Path, chain: Sequence[int]) -> list[str]:
    found: set[str] = set()
    for s in chain:
        d = step_dir(results, s)
        if d.is_dir():
            found |= {b for p in d.iterdir() if p.suffix == ".jsonl" and (b := bench_of_file(p.name))}
    return sorted(found)


def items_from_rows(results: Path, bench: str, chain: Sequence[int]) -> list[Item]:
    """Stand-in items when no item files are given: ids, gold and option count from the rows."""
    seen: dict[str, Item] = {}
    for s in chain:
        for row in _bench_rows(results, s, bench):
            iid, k, gold = row.get("item_id"), row.get("n_options"), row.get("answer")
            if iid is None or str(iid) in seen or not isinstance(k, int) or not isinstance(gold, int):
                continue
            seen[str(iid)] = Item(str(iid), bench, "", tuple(f"option {j + 1}" for j in range(k)), gold,
                                  row.get("video_id"), meta={"from_rows": True})
    return sorted(seen.values(), key=lambda i: i.item_id)


def _bench_rows(results: Path, step: int, bench: str) -> Iterator[Mapping[str, Any]]:
    """The benchmark's rows at ``step``, as written, read through the typed records."""
    d = step_dir(results, step)
    if not d.is_dir():
        return
    for p in sorted(d.glob("*.jsonl")):
        if bench_of_file(p.name) == bench:
            yield from (rec.fields for rec in read_records(p))


def _bench_errors(results: Path, step: int, bench: str) -> dict[str, Mapping[str, Any]]:
    """item -> its last error row (as written) at ``step``."""
    out: dict[str, Mapping[str, Any]] = {}
    d = step_dir(results, step)
    for p in sorted(d.glob("*.jsonl")) if d.is_dir() else []:
        if bench_of_file(p.name) == bench:
            for rec in read_records(p):
                if isinstance(rec, ErrorRow):
                    out[rec.item_id] = rec.fields
    return out


def _evidence(f: ItemFate, states: Mapping[int, StepState], last_error: Mapping[int, Mapping[str, Mapping[str, Any]]],
              chain: Sequence[int]) -> ItemEvidence:
    iid = f.item.item_id
    rows: dict[int, Mapping[str, Any]] = {}
    for s in f.fates:
        ok = states[s].verdict(iid).row
        row = ok.fields if ok is not None else last_error[s].get(iid)
        if row is not None:
            rows[s] = row
    return ItemEvidence(f.item, f.final, f.removed_at, dict(f.fates), dict(f.margins), rows,
                        pending_cause(f, chain, states))


def read_bench(results: Path, bench: str, items: Sequence[Item], chain: Sequence[int],
               has_frames: Callable[[Item], bool], provenance: dict[int, StepProvenance],
               step0: Step0 | None = None, current: ItemHashes | None = None) -> BenchEvidence:
    """One benchmark's evidence; provenance of its rows is added to ``provenance``. With ``step0``,
    its duplicates are removed at step 0 (they never enter the chain, as in the screening runs) and
    a step-0 row opens the summary. ``current``: the items' fingerprints, when the items are the
    user's (a row of an item edited since is stale); None for stand-ins made from the rows."""
    states: dict[int, StepState] = {}
    last_error: dict[int, dict[str, Mapping[str, Any]]] = {}
    for s in chain:
        st = StepStore(step_dir(results, s)).current_state([bench], items=current)
        states[s] = st
        prov = provenance.setdefault(s, StepProvenance())
        for v in st.verdicts():
            if v.row is not None:
                prov.add(v.row.fields)
        # only error rows are read a second time, and only for benchmarks that have them
        last_error[s] = _bench_errors(results, s, bench) if st.errors else {}
    dups = step0.removed(items) if step0 is not None else {}
    chained = [it for it in items if it.item_id not in dups]
    fates = item_fates(chained, chain, states, has_frames)
    summary = summary_rows(fates, chain, states) if fates else []
    flags = sanity_flags(summary)
    evidence = {f.item.item_id: _evidence(f, states, last_error, chain) for f in fates}
    for it in items:
        if it.item_id in dups:
            evidence[it.item_id] = ItemEvidence(it, REMOVED, 0, dict.fromkeys(chain, NOT_REACHED), {},
                                                {0: dups[it.item_id]})
    if step0 is not None and items:
        row = step0_row(bench, len(items), len(items) - len(chained), bench in step0.deduplicated(items))
        summary = [row, *summary]
    return BenchEvidence(bench, [evidence[it.item_id] for it in items], summary, flags)


def step0_row(bench: str, items: int, removed: int, deduplicated: bool = True) -> dict[str, Any]:
    """Step 0 in the summary's shape: every item is looked at, duplicates are removed. A benchmark
    the dedup run never read was not looked at: it decided nothing of it (``not_deduplicated``
    counts its items), which a row of zero removals would hide."""
    done = items if deduplicated else 0
    return {"bench": bench, "step": 0, "done": done, "removed": removed, "error_rows": 0, "failed": 0,
            "removal_rate": round(removed / done, 4) if done else None, "pending": 0, "not_screened": 0,
            "forwards": 0, "not_deduplicated": 0 if deduplicated else items}


@dataclass(frozen=True, slots=True)
class Step0:
    """The step-0 (dedup) outcome: ``step0_removed.jsonl``'s rows by (benchmark, item id), or a kept
    list (what step 0 removed is then its complement, as ``screen --keep`` takes it)."""

    source: Path
    rows: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    kept: KeptList | None = None
    kept_name: str = ""
    # with ``rows``: the benchmarks the dedup run read (its ``step0_kept.parquet`` names every item
    # it read); None: not known, every benchmark counts as deduplicated
    scope: frozenset[str] | None = None

    def deduplicated(self, items: Iterable[Item]) -> set[str]:
        """The benchmarks of ``items`` that the dedup run behind this outcome read; step 0 removed
        nothing of another, as ``screen --keep`` screens it whole (``KeptList.covered``)."""
        if self.kept is not None:
            return self.kept.covered(items)
        return {it.bench for it in items if self.scope is None or it.bench in self.scope}

    def removed(self, items: Iterable[Item]) -> dict[str, Mapping[str, Any]]:
        """Item id -> why step 0 removed it, among ``items`` (loaded together, or one benchmark's:
        their ids are unique). An item is its benchmark's: another benchmark's item of the same id
        is another item."""
        if self.kept is not None:
            why = {"verdict": f"not in the step-0 kept list ({self.kept_name})"}
            return {it.item_id: why for it in self.kept.removed(items)}
        # a row that names no benchmark (not one ``dedup`` writes) stands for its id in any
        return {it.item_id: row for it in items
                if (row := self.rows.get((it.bench, it.item_id), self.rows.get(("", it.item_id)))) is not None}

    def only(self, items: Iterable[Item]) -> Step0:
        """The outcome for ``items`` alone (what a benchmark's task needs)."""
        items = list(items)
        by_id = {it.item_id: it.bench for it in items}
        return Step0(self.source, {(by_id[i], i): row for i, row in self.removed(items).items()},
                     scope=frozenset(self.deduplicated(items)))


def read_step0(path: Path) -> Step0:
    """``benchcheck dedup``'s output folder (``step0_removed.jsonl``, else ``step0_kept.parquet``)
    or a kept-list file (``--keep``'s formats: Parquet, JSONL, one id a line), whose complement is
    what step 0 removed, as ``screen --keep`` reads it (``screen.plan.KeptList``). A file that cannot
    be read is one ``ValueError`` line naming ``--step0`` (report, export and probe show it)."""
    try:
        return _read_step0(path)
    except Exception as e:  # a damaged kept list: Parquet, JSON, a missing column, an unreadable file
        raise ValueError(f"--step0 {path}: cannot read the step-0 outcome ({type(e).__name__}: "
                         f"{str(e)[:200]})") from e


def _read_step0(path: Path) -> Step0:
    import json

    removed: dict[tuple[str, str], Mapping[str, Any]] = {}
    jsonl = path / "step0_removed.jsonl" if path.is_dir() else None
    if jsonl is not None and jsonl.is_file():
        for line in jsonl.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and row.get("item_id") is not None:
                key = (str(row.get("bench") or ""), str(row["item_id"]))
                removed[key] = {k: row.get(k) for k in STEP0_FIELDS if row.get(k) is not None}
        return Step0(path, removed, scope=_dedup_scope(path / "step0_kept.parquet"))
    keep_file = path / "step0_kept.parquet" if path.is_dir() else path
    return Step0(path, kept=load_keep(keep_file), kept_name=keep_file.name)


def _dedup_scope(kept_file: Path) -> frozenset[str] | None:
    """The benchmarks a dedup run read, from the kept list it wrote beside ``step0_removed.jsonl``
    (None where it is gone or names no benchmark: the removed rows alone cannot tell a benchmark
    with no duplicates from one never read)."""
    if not kept_file.is_file():
        return None
    kept = load_keep(kept_file)
    return kept.benches if kept.pairs is not None else None


# gold, duplicate_gold, their texts and match: only a gold conflict's row has them (a near one's
# letters name options of two lists, so the page needs the texts)
STEP0_FIELDS = ("verdict", "kind", "similarity", "duplicate_of", "duplicate_bench", "gold", "duplicate_gold",
                "gold_text", "duplicate_gold_text", "match")


Group = tuple[str, list[Item] | None]


def bench_groups(results: Path, items: Sequence[Item] | None, chain: Sequence[int]) -> list[Group]:
    """The benchmarks to read (sorted) with their items; ``None`` when the rows must supply them."""
    if items is None:
        return [(b, None) for b in benches_with_rows(results, chain)]
    by_bench: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_bench[it.bench].append(it)
    return sorted(by_bench.items())


def read_group(results: Path, bench: str, items: Sequence[Item] | None, chain: Sequence[int],
               has_frames: Callable[[Item], bool], provenance: dict[int, StepProvenance],
               step0: Step0 | None = None) -> BenchEvidence:
    if items is None:
        return read_bench(results, bench, items_from_rows(results, bench, chain), chain, has_frames, provenance, step0)
    return read_bench(results, bench, items, chain, has_frames, provenance, step0, fingerprints(items))


def iter_benches(results: Path, items: Sequence[Item] | None, chain: Sequence[int],
                 has_frames: Callable[[Item], bool], provenance: dict[int, StepProvenance],
                 step0: Step0 | None = None) -> Iterator[BenchEvidence]:
    """Per benchmark (sorted): with item files, their benchmarks; without, those that have rows.
    With ``step0``, its duplicates are removed at step 0, as the report counts them."""
    for bench, its in bench_groups(results, items, chain):
        yield read_group(results, bench, its, chain, has_frames, provenance, step0)


def run_log(results: Path) -> list[dict[str, Any]]:
    return list(read_rows(results / "run_log.jsonl"))


def run_specs(results: Path, chain: Sequence[int]) -> dict[int, dict[str, Any]]:
    """``run_spec.json`` beside a step's rows, where a runner wrote one."""
    import json

    out = {}
    for s in chain:
        p = step_dir(results, s) / "run_spec.json"
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[s] = data
    return out


def sweep_revisions(results: Path) -> list[str | None]:
    """The model revision each condition of a sweep ran with (``run_spec.json`` beside its typed
    rows): a random-weight checkpoint moved or deleted since is still told by it."""
    return [rev for _, rev in condition_models(results).values()]
