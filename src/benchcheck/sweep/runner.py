"""Run the sweep: units of (bench, condition, chunk of items), decoded in a process pool, asked
of the engine; each answer a typed row appended through ``store`` with its condition's
``config_hash``, then its exchange row appended to the CSV. Resumable: what is done is the
reducer's word over the rows (``sweep.state``); a row under another hash is redone.

The pieces are shared by every executor through the sweep's task adapter (``sweep/task.py``, on
``unit_loop.run_task``), so the rule for each lives here once: :func:`begin_sweep` (run specs,
NA rows, no-video failures), :func:`prepare_unit` (decode, build requests) and
:func:`unit_result` (answers -> rows, raw lines, failures; pure), :func:`write_records` (the one
writer) and :func:`end_sweep` (reused rows, whose sources the units just wrote, the run log and
the summary line). The loop, leases, retries and stopping are ``unit_loop``'s.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchcheck.engines.base import Failure, GenerateRequest, Generation
from benchcheck.items import fingerprints
from benchcheck.lease import try_lease
from benchcheck.records import ErrorRow, GenRow
from benchcheck.spec import RunSpec, write_run_spec
from benchcheck.store import append_records, append_rows
from benchcheck.sweep.conditions import source_spec
from benchcheck.sweep.plan import DECODE, Cell, failure_label
from benchcheck.sweep.results import (
    ALL_CONDITIONS,
    SweepPaths,
    answered,
    append_csv_fresh,
    append_failures,
    append_raw,
    log_line,
)
from benchcheck.sweep.rows import (
    answer_record,
    csv_of,
    engine_error,
    engine_failure,
    failure_line,
    na_record,
    plan_error,
    raw_of,
    reuse_record,
)
from benchcheck.sweep.state import answer_of, group_state, load_state, record_specs
from benchcheck.verdicts import StepState
from benchcheck.video.plans import FramePlan

Echo = Callable[[str], None]
FrameFn = Callable[[str, FramePlan], Awaitable[tuple[list[bytes], float]]]


@dataclass(frozen=True, slots=True)
class Unit:
    bench: str
    condition: str
    cells: tuple[Cell, ...]


@dataclass(slots=True)
class UnitResult:
    """What one unit produced; nothing is written yet. ``records``: the typed rows (answers and
    engine errors) in item order."""

    records: list[GenRow | ErrorRow] = field(default_factory=list)
    raw: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    infer: int = 0
    infer_s: float = 0.0
    decode_s: float = 0.0
    prompt_tokens: int = 0
    unreachable: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    """A unit with its frames decoded: the engine requests and the cells they answer (picklable,
    so the Ray executor's CPU actors hand it to its engine actors)."""

    asked: tuple[tuple[Cell, float], ...]  # (cell, its decode seconds), one per request
    requests: tuple[GenerateRequest, ...]
    failures: tuple[dict[str, Any], ...]  # decode failures
    decode_s: float
    errors: tuple[ErrorRow, ...] = ()  # the same, as error rows of the items


async def prepare_unit(unit: Unit, spec: RunSpec, frames: FrameFn) -> Prepared:
    """Decode the unit's frames and build one request per cell; a bad video is a failure line."""
    reqs: list[GenerateRequest] = []
    asked: list[tuple[Cell, float]] = []
    failures: list[dict[str, Any]] = []
    errors: list[ErrorRow] = []
    total = 0.0
    for cell in unit.cells:
        images: list[bytes] = []
        decode_s = 0.0
        if cell.plan is not None:
            try:
                images, decode_s = await frames(cell.item.video_id or "", cell.plan)
            except (ValueError, OSError) as e:
                failures.append(failure_line(cell, DECODE, str(e), spec))
                errors.append(engine_error(cell, spec, Failure(cell.item.item_id, "internal", f"{DECODE}: {e}")))
                continue
        total += decode_s
        reqs.append(GenerateRequest(request_id=f"{cell.condition}|{cell.item.item_id}", prompt=cell.prompt,
                                    images=tuple(images), max_tokens=spec.gen.max_tokens,
                                    assistant_prefix=spec.gen.assistant_prefix))
        asked.append((cell, decode_s))
    return Prepared(tuple(asked), tuple(reqs), tuple(failures), total, tuple(errors))


def unit_result(p: Prepared, spec: RunSpec, answers: Sequence[Generation | Failure],
                engine_config: str | None = None) -> UnitResult:
    """The records of a prepared unit once its requests are answered (pure): a row per answer, an
    error row and a failure line per failure; ``engine_config`` goes into each answer's row."""
    out = UnitResult(records=list(p.errors), failures=list(p.failures), decode_s=p.decode_s)
    if not p.requests:
        return out
    out.unreachable = all(isinstance(a, Failure) and a.kind == "connection" for a in answers)
    for (cell, decode_s), ans in zip(p.asked, answers, strict=True):
        if isinstance(ans, Failure):
            out.records.append(engine_error(cell, spec, ans))
            out.failures.append(engine_failure(cell, spec, ans))
            continue
        row, raw = answer_record(cell, spec, ans, decode_s, engine_config)
        out.records.append(row)
        out.raw.append(raw)
        out.infer += 1
        out.infer_s += ans.latency_s
        out.prompt_tokens += ans.prompt_tokens
    return out


@dataclass(slots=True)
class CondRun:
    """One condition within a run: when its first unit began (or the previous unit ended, where
    the executor does not say), when its last ended, its inferences and rows added."""

    started: float
    ended: float
    infer: int = 0
    rows: int = 0


@dataclass(slots=True)
class SweepSummary:
    written: Counter[str] = field(default_factory=Counter)  # by status; "reuse" for reused rows
    failures: int = 0
    held: int = 0  # cells of (bench, condition) groups another live process holds: left to it
    held_groups: set[tuple[str, str]] = field(default_factory=set)
    wall_s: float = 0.0
    aborted: bool = False
    conditions: dict[str, CondRun] = field(default_factory=dict)

    def line(self) -> str:
        parts = " ".join(f"{k}={v}" for k, v in sorted(self.written.items()))
        held = f"; {self.held} held by another process" if self.held else ""
        return f"sweep: rows added {parts or 'none'}; failures {self.failures}{held}; {self.wall_s:.1f}s" + (
            " (stopped early: engine unreachable; rerun to continue)" if self.aborted else "")

    def count(self, condition: str, rows: int, infer: int = 0, started: float | None = None) -> None:
        now = time.time()
        c = self.conditions.setdefault(condition, CondRun(started if started is not None else now, now))
        c.ended, c.rows, c.infer = now, c.rows + rows, c.infer + infer


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    workers: int = 6
    chunk: int = 1
    progress: bool = True


def write_records(paths: SweepPaths, bench: str, condition: str, records: Sequence[GenRow | ErrorRow]) -> int:
    """Typed rows through the store, then their exchange rows to the CSV: an answer's, and an error
    row for a cell that failed (once per key and spec: ``results.append_csv_fresh``), so every
    reader of the CSV counts the cells our run could not answer; the answer of a cell asked again
    follows its error row and replaces it. A kill between the two is caught up by the next run's
    :func:`sync_csv`; returns CSV rows added."""
    if not records:
        return 0
    append_records(paths.rows(condition, bench), records)
    return len(append_csv_fresh(paths.csv, [csv_of(r) for r in records]))


def _write_settled(paths: SweepPaths, records: Sequence[GenRow], summary: SweepSummary, label: str) -> None:
    """NA and reused rows: raw lines (the reason and ``reused_from`` are kept even when the CSV has no
    ``meta`` column: a file made elsewhere), then the typed rows, then the CSV, per group.

    Each group is written under its lease (the one its ``GroupBook`` takes), and only the rows its
    file does not settle yet, read under that lease: two runs started on the same work both plan
    these rows, and without it each appended them (every NA and reused row twice). A group another
    live process holds is left to it: that process wrote the rows it planned before it took the
    group (NA rows) or writes them when its groups are done (reused rows); else the next run does."""
    groups: dict[tuple[str, str], list[GenRow]] = {}
    for rec in records:
        groups.setdefault((str(rec.step), str(rec.bench)), []).append(rec)
    for (condition, bench), recs in groups.items():
        lease = try_lease(paths.raw(condition, bench))
        if lease is None:
            summary.held += len(recs)
            summary.held_groups.add((bench, condition))
            continue
        with lease:
            mine = {(bench, r.item_id): h for r in recs if (h := r.item_hash) is not None}
            state = group_state(paths, bench, condition, recs[0].config_hash or "", mine)
            recs = [r for r in recs if not state.verdict(r.item_id).done]
            if not recs:
                continue
            append_raw(paths, condition, bench, [raw_of(x) for x in recs])
            write_records(paths, bench, condition, recs)
        summary.written[label] += len(recs)
        summary.count(condition, len(recs))


def _same_error(state: StepState, rec: ErrorRow) -> bool:
    last = state.last_error.get(rec.item_id)
    return last is not None and last.error == rec.error


def _write_plan_errors(paths: SweepPaths, records: Sequence[ErrorRow], summary: SweepSummary) -> None:
    """The error rows of cells that cannot be asked (``rows.plan_error``), typed and in the CSV. Each
    group under its lease, as its NA rows are, and only for a cell whose rows, read under that
    lease, hold no answer and not this very error last (every run plans such a cell again: it gets
    a row when it fails anew, not at each run). A group another live process holds is left to it
    (it wrote these rows when it began) or to the next run."""
    groups: dict[tuple[str, str], list[ErrorRow]] = {}
    for rec in records:
        groups.setdefault((str(rec.step), str(rec.bench)), []).append(rec)
    for (condition, bench), recs in groups.items():
        lease = try_lease(paths.raw(condition, bench))
        if lease is None:
            continue
        with lease:
            mine = {(bench, r.item_id): h for r in recs if (h := r.item_hash) is not None}
            state = group_state(paths, bench, condition, recs[0].config_hash or "", mine)
            recs = [r for r in recs if not state.verdict(r.item_id).done and not _same_error(state, r)]
            if not recs:
                continue
            added = write_records(paths, bench, condition, recs)
        summary.count(condition, added)


def write_static(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """NA rows and the failures of items without a usable video or frame plan (no engine needed):
    ``no_video`` / ``frame_plan`` lines, and an error row of each such cell (typed and in the CSV,
    so every reader of the CSV counts it as it counts a decode failure)."""
    _write_settled(paths, [na_record(c, specs[c.condition]) for c in cells if c.kind == "na"], summary, "NA")
    failed = [c for c in cells if c.kind == "failure"]
    if failed:
        append_failures(paths, [failure_line(c, failure_label(c)[0].replace(" ", "_"), c.reason, specs[c.condition])
                                for c in failed])
        summary.failures += len(failed)
        _write_plan_errors(paths, [plan_error(c, specs[c.condition]) for c in failed], summary)


def write_reused(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """Reused rows from their source answers, as the reducer reads them now (made under the source
    condition's spec for the same model and budget); a missing source waits for a rerun."""
    pending = [c for c in cells if c.kind == "reuse"]
    if not pending:
        return
    by_source = {c.reuse_from: source_spec(specs[c.condition], c.reuse_from) for c in pending if c.reuse_from}
    state = load_state(paths, by_source, {c.item.bench for c in pending}, fingerprints(c.item for c in pending))
    rows, waiting = [], []
    for c in pending:
        if (c.item.bench, c.reuse_from) in summary.held_groups:
            continue  # the process holding the source group writes this reuse when it is done
        src = answer_of(state, c.item.bench, c.reuse_from or "", c.item.item_id)
        if src is None or not answered(src.parse_status):
            waiting.append(failure_line(c, "reuse_wait", f"no {c.reuse_from} answer yet; rerun after it is done",
                                        specs[c.condition]))
        else:
            rows.append(reuse_record(c, specs[c.condition], src))
    _write_settled(paths, rows, summary, "reuse")
    if waiting:
        append_failures(paths, waiting)
        summary.failures += len(waiting)


def sync_csv(cells: Sequence[Cell], paths: SweepPaths) -> int:
    """Append to the CSV the current answers of the typed rows it lacks, and an error row of each
    cell whose typed rows hold errors and no answer (a run killed between a row and its CSV row),
    groups in plan order, items in id order; returns rows added."""
    groups = dict.fromkeys((c.item.bench, c.condition, c.config_hash) for c in cells)
    hashes = fingerprints(c.item for c in cells)
    added = 0
    for bench, condition, chash in groups:
        if not paths.rows(condition, bench).is_file():
            continue
        st = group_state(paths, bench, condition, chash, hashes)
        recs: list[GenRow | ErrorRow] = []
        for v in st.verdicts():
            rec = v.row if isinstance(v.row, GenRow) else st.last_error.get(v.item_id)
            if rec is not None:
                recs.append(rec)
        added += len(append_csv_fresh(paths.csv, [csv_of(r) for r in recs]))
    return added


def record_run_specs(specs: Mapping[str, RunSpec], paths: SweepPaths) -> None:
    """Each condition's ``run_spec.json`` (beside the raw lines and the typed rows) and its spec kept
    by hash (``run_specs.jsonl``), so a later run can say what changed."""
    record_specs(paths, specs.values())
    for name, spec in specs.items():
        write_run_spec(spec, paths.results / "p1_raw" / name)
        write_run_spec(spec, paths.rows_dir(name))


def begin_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths) -> SweepSummary:
    """Before any unit: each condition's run spec (and its hash's spec kept for later runs to say
    what changed), the CSV caught up with the typed rows, the NA rows and the no-video failures."""
    summary = SweepSummary()
    record_run_specs(specs, paths)
    n = sync_csv(cells, paths)
    if n:
        log_line(paths, f"csv: {n} rows caught up from {paths.results / 'sweep_rows'}")
    write_static(cells, specs, paths, summary)
    return summary


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Who ran the sweep, for ``run_log.jsonl``: the engine, its model, endpoints, GPUs (0: a CPU
    run; None: not known, ``data.runlog`` then counts one per endpoint)."""

    engine: str
    model: str
    endpoints: tuple[str, ...] = ()
    gpus: int | None = None
    engine_config_hash: str | None = None  # the engine's own configuration (hf: HFConfig.hash)


def run_log_rows(summary: SweepSummary, started: float, ident: RunIdentity | None) -> list[dict[str, Any]]:
    """One row per condition the run wrote (its own interval) and one for the whole run
    (``condition`` = ``ALL_CONDITIONS``): what ``pack`` reports as wall time and items/s."""
    import socket

    base: dict[str, Any] = {"host": socket.gethostname(), "executor": "sweep"}
    if ident is not None:
        base.update(engine=ident.engine, model=ident.model, endpoints=list(ident.endpoints))
        if ident.gpus is not None:
            base["gpus"] = ident.gpus
        if ident.engine_config_hash is not None:
            base["engine_config_hash"] = ident.engine_config_hash
    rows = [{**base, "condition": cond, "started": round(c.started, 3), "ended": round(c.ended, 3),
             "wall_s": round(c.ended - c.started, 3), "ok": c.infer, "rows_added": c.rows}
            for cond, c in summary.conditions.items()]
    ended = started + summary.wall_s
    rows.append({**base, "condition": ALL_CONDITIONS, "started": round(started, 3), "ended": round(ended, 3),
                 "wall_s": round(summary.wall_s, 3), "ok": sum(c.infer for c in summary.conditions.values()),
                 "rows_added": sum(c.rows for c in summary.conditions.values()), "aborted": summary.aborted})
    return rows


def end_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths, summary: SweepSummary,
              t0: float, echo: Echo, ident: RunIdentity | None = None) -> SweepSummary:
    """After the units: the reused rows (their sources are written now), the run log, the summary line."""
    if not summary.aborted:
        write_reused(cells, specs, paths, summary)
    summary.wall_s = time.perf_counter() - t0
    append_rows(paths.run_log, run_log_rows(summary, time.time() - summary.wall_s, ident))
    log_line(paths, summary.line())
    echo(summary.line())
    return summary
