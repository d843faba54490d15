"""The returns report (docs/PROTOCOL.md, "Returns"): per step or condition, what was done and how fast.

Per stage: items done, removed, error rows (count and up to 5 example item ids), permanently
failed items, wall time, items/s per GPU, rows added, the launch lines that served it and the
launcher changes (a note from the operator plus every flag that differs from the protocol: docs/PROTOCOL.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchcheck.data.launch import EXPECTED, changes, commands, lines_for_stage, read_launch_lines
from benchcheck.data.runlog import ALL_CONDITIONS, StageTiming, read_run_log
from benchcheck.records import NA
from benchcheck.store import Skipped, StepStore, numbered_rows, read_rows
from benchcheck.sweep.results import CSV_NAME, answered, read_csv_counted, row_status
from benchcheck.verdicts import ItemVerdict, StepState

ReportKind = Literal["pool", "sweep"]
SCHEMA_VERSION = 1
N_EXAMPLES = 5
SWEEP_CSV = CSV_NAME
RUN_LOG = "run_log.jsonl"
_STEP_DIR = re.compile(r"^step(\d+)$")


@dataclass(slots=True)
class StageReport:
    """One screening step or sweep condition."""

    name: str
    items_done: int
    removed: int | None
    error_rows: int
    error_examples: list[str]
    failed_items: int | None
    na_rows: int | None
    wall_s: float | None
    items_per_s_per_gpu: float | None
    rows_added: int | None
    runs: int | None
    gpus_assumed: bool
    launch_lines: list[str]
    launcher_changes: list[str]
    cpu: bool = False  # every run recorded "gpus": 0: a CPU run, no items/s per GPU
    # A sweep's answers with no option letter read: among the items done (the sweep scores them
    # wrong), never error rows; None for a screening step, which has no such answer.
    unparsed_rows: int | None = None


@dataclass(slots=True)
class ReturnsReport:
    """Everything the run sends back about itself; ``schema_version`` versions the JSON."""

    kind: ReportKind
    host: str
    date: str
    tarball: str
    results: str
    stages: list[StageReport] = field(default_factory=list)
    launch_params: list[str] = field(default_factory=list)
    launcher_note: str = ""
    failures: int | None = None
    failure_examples: list[str] = field(default_factory=list)
    timing: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # A sweep's analysis in the tarball: {"folder", "found_by", "files": [{"path", "sha256"}]}; None
    # for a pool, or a sweep packed without one (a note says so)
    analysis: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def results_kind(results: Path) -> ReportKind:
    """A sweep results folder has ``conditions_results.csv``; anything else is a pool."""
    return "sweep" if (results / SWEEP_CSV).is_file() else "pool"


def _find(dirs: Iterable[Path], name: str) -> list[Path]:
    out = []
    for d in dirs:
        out += sorted(p for p in (d / name, *d.glob(f"*/{name}")) if p.is_file())
    return list(dict.fromkeys(out))


def _changes(note: str, detected: list[str]) -> list[str]:
    return ([note] if note else []) + detected


@dataclass(slots=True)
class _StepTally:
    """What the report needs from a step: the reducer's verdicts, read compact (the typed fields
    of each ok row, not its log-probs: a million-row step is counted without gigabytes)."""

    state: StepState

    def verdicts(self) -> list[ItemVerdict]:
        return list(self.state.verdicts())

    def unresolved(self) -> list[str]:
        return sorted(v.item_id for v in self.verdicts() if v.error_rows and not v.done)

    def failed(self) -> int:
        return sum(1 for v in self.verdicts() if v.failed)

    @property
    def models(self) -> Counter[str]:
        return Counter(r.model for r in self.state.ok.values() if r.model)


def _tally(step_dir: Path, skipped: Skipped) -> _StepTally:
    store = StepStore(step_dir)
    return _StepTally(store.current_state(compact=True, skipped=skipped))


def _pool_stages(results: Path, timings: dict[str, StageTiming] | None, lines: list[str],
                 note: str, skipped: Skipped) -> list[StageReport]:
    stages = []
    steps = sorted((int(m.group(1)), p) for p in results.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name)))
    for k, d in steps:
        st = _tally(d, skipped)
        verdicts = st.verdicts()
        examples = (st.unresolved() or sorted(v.item_id for v in verdicts if v.error_rows))[:N_EXAMPLES]
        t = (timings or {}).get(f"step{k}")
        model = t.models[0] if t and t.models else (st.models.most_common(1)[0][0] if st.models else None)
        mine = lines_for_stage(lines, f"step{k}", model)
        expected = {**EXPECTED["pool"], **EXPECTED.get(f"pool:step{k}", {})}
        stages.append(StageReport(
            name=f"step{k}", items_done=sum(v.done for v in verdicts), removed=sum(v.removed for v in verdicts),
            error_rows=sum(v.error_rows for v in verdicts), error_examples=examples, failed_items=st.failed(),
            na_rows=None,
            wall_s=t.wall_s if t else None, items_per_s_per_gpu=t.items_per_s_per_gpu if t else None,
            rows_added=t.rows_added if t else None, runs=t.runs if t else None,
            gpus_assumed=bool(t and t.gpus_assumed), launch_lines=mine,
            launcher_changes=_changes(note, changes(mine, expected)), cpu=bool(t and t.cpu)))
    return stages


def _sweep_rows(results: Path, notes: list[str]) -> list[dict[str, str]]:
    """The rows that count, as the sweep itself reads them (``sweep.results.read_csv``: a key's
    last complete row under its condition's current spec; a torn line and a key with rows of an
    earlier spec only count nowhere); the stale keys and a file it cannot read are notes."""
    try:
        rows, stale = read_csv_counted(results / SWEEP_CSV)
    except ValueError as e:  # a header without the key columns: the file goes in, its rows are not counted
        notes.append(f"{e}: its rows are not counted")
        return []
    if stale:
        b, i, c = min(stale)
        notes.append(f"{len(stale)} cells have rows of an earlier spec only and are not counted (first: {b} {i} "
                     f"{c}); `sweep dry-run` lists them as stale, `sweep run` redoes them")
    return rows


def _sweep_stages(results: Path, timings: dict[str, StageTiming] | None, infer: dict[str, int],
                  lines: list[str], note: str, notes: list[str]) -> list[StageReport]:
    done: dict[str, set[str]] = {}
    unparsed: Counter[str] = Counter()
    na: Counter[str] = Counter()
    errors: dict[str, list[str]] = {}
    for row in _sweep_rows(results, notes):
        cond, iid = row["condition"], row["item_id"]
        status = row_status(row)  # the sweep's rule: an unparsed answer is done (and wrong), not an error
        if answered(status):
            done.setdefault(cond, set()).add(iid)
            unparsed[cond] += status == "unparsed"
        elif status == NA:
            na[cond] += 1
        else:
            errors.setdefault(cond, []).append(iid)
    detected = changes(lines, EXPECTED["sweep"])
    cmds = list(dict.fromkeys(commands(lines)))
    stages = []
    for cond in sorted((set(done) | set(na) | set(errors) | set(timings or {})) - {ALL_CONDITIONS}):
        t = (timings or {}).get(cond)
        errs = errors.get(cond, [])
        added = t.rows_added if t and t.rows_added is not None else infer.get(cond)
        stages.append(StageReport(
            name=cond, items_done=len(done.get(cond, ())), removed=None, error_rows=len(errs),
            error_examples=sorted(set(errs))[:N_EXAMPLES], failed_items=None, na_rows=na.get(cond, 0),
            wall_s=t.wall_s if t else None, items_per_s_per_gpu=t.items_per_s_per_gpu if t else None,
            rows_added=added, runs=t.runs if t else None, gpus_assumed=bool(t and t.gpus_assumed),
            launch_lines=cmds, launcher_changes=_changes(note, detected), cpu=bool(t and t.cpu),
            unparsed_rows=unparsed.get(cond, 0)))
    t = (timings or {}).get(ALL_CONDITIONS)
    if stages and t is not None:  # the sweep's runs as a whole: their wall time and items/s per GPU
        stages.append(StageReport(
            name="all conditions", items_done=sum(s.items_done for s in stages), removed=None,
            error_rows=sum(s.error_rows for s in stages), error_examples=[], failed_items=None,
            na_rows=sum(s.na_rows or 0 for s in stages), wall_s=t.wall_s, items_per_s_per_gpu=t.items_per_s_per_gpu,
            rows_added=t.rows_added, runs=t.runs, gpus_assumed=t.gpus_assumed, launch_lines=cmds,
            launcher_changes=[], cpu=t.cpu, unparsed_rows=sum(s.unparsed_rows or 0 for s in stages)))
    return stages


def _timing_table(paths: list[Path]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The seed-001 per-condition timing table from ``p1_timing.jsonl``, and inferences per condition."""
    acc: dict[str, list[float]] = {}
    for p in paths:
        for r in read_rows(p):
            cond = r.get("condition")
            if not isinstance(cond, str):
                continue
            a = acc.setdefault(cond, [0.0, 0.0, 0.0, 0.0])
            for i, k in enumerate(("infer", "infer_s", "decode_s", "prompt_tokens")):
                v = r.get(k)
                if isinstance(v, int | float) and not isinstance(v, bool):
                    a[i] += float(v)
    table: list[dict[str, Any]] = []
    for cond, (n, s, d, tok) in sorted(acc.items()):
        m = max(n, 1.0)
        table.append({"condition": cond, "infer": int(n), "infer_s_per_item": round(s / m, 3),
                      "decode_s_per_item": round(d / m, 3), "prompt_tokens_per_item": round(tok / m, 1)})
    return table, {cond: int(a[0]) for cond, a in acc.items()}


def _failures(paths: list[Path], skipped: Skipped) -> tuple[int | None, list[str]]:
    """The failure rows and example ids. A row without an item id is no failure of an item: it
    goes to ``skipped.no_id`` (``file:line``), as the reducer skips such a row of a step."""
    if not paths:
        return None, []
    n, ids = 0, []
    for p in paths:
        for line, r in numbered_rows(p):
            if r.get("item_id") is None:
                skipped.no_id.append(f"{p}:{line}")
                continue
            n += 1
            ids.append(str(r["item_id"]))
    return n, sorted(set(ids))[:N_EXAMPLES]


def _first(where: list[str]) -> str:
    more = f" and {len(where) - N_EXAMPLES} more" if len(where) > N_EXAMPLES else ""
    return f"{', '.join(where[:N_EXAMPLES])}{more}"


def _skipped_notes(skipped: Skipped) -> list[str]:
    """One note per kind of row the counts leave out, naming the first rows of it by file and line."""
    notes = []
    if skipped.no_id:
        notes.append(f"{len(skipped.no_id)} result rows have no item_id (null or missing) and are not counted: "
                     f"{_first(skipped.no_id)}")
    if skipped.unreadable:
        notes.append(f"{len(skipped.unreadable)} result rows have a schema_version this benchcheck cannot read and "
                     f"are not counted (they are in the tarball as written): {_first(skipped.unreadable)}")
    return notes


def build_report(results: Path, logs: list[Path], host: str, date: str, tarball: str,
                 launcher_note: str = "") -> ReturnsReport:
    """Read a results folder (and its logs) into a :class:`ReturnsReport`."""
    kind = results_kind(results)
    search = [results, *logs]
    lines = read_launch_lines(_find(logs or [results], "launch_params.txt"))
    timings = read_run_log(results / RUN_LOG)
    rep = ReturnsReport(kind, host, date, tarball, str(results), launch_params=lines, launcher_note=launcher_note)
    if timings is None:
        rep.notes.append(f"no {RUN_LOG} in {results}: wall time, items/s per GPU and rows added are unknown")
    if not lines:
        rep.notes.append("no launch_params.txt in the logs: launch lines unknown")
    skipped = Skipped()
    if kind == "pool":
        rep.stages = _pool_stages(results, timings, lines, launcher_note, skipped)
    else:
        rep.timing, infer = _timing_table(_find(search, "p1_timing.jsonl"))
        rep.failures, rep.failure_examples = _failures(_find(search, "failures.jsonl"), skipped)
        rep.stages = _sweep_stages(results, timings, infer, lines, launcher_note, rep.notes)
    rep.notes += _skipped_notes(skipped)
    if not rep.stages:
        rep.notes.append(f"no step folders and no {SWEEP_CSV} in {results}: nothing to report")
    return rep


def _fmt(v: float | int | None, digits: int = 1) -> str:
    if v is None:
        return "unknown"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.{digits}f}"


def _hms(s: float | None) -> str:
    if s is None:
        return "unknown"
    h, rem = divmod(round(s), 3600)
    return f"{h}h{rem // 60:02d}m{rem % 60:02d}s"


def to_markdown(rep: ReturnsReport) -> str:
    """The report as Markdown: one table row per stage, then launch lines, changes and notes."""
    what = "step" if rep.kind == "pool" else "condition"
    out = [f"# Returns report: {rep.tarball}", "",
           f"- kind: {rep.kind}; host: {rep.host}; date: {rep.date}; results: `{rep.results}`", ""]
    sweep = rep.kind == "sweep"
    head = [what, "items done", "removed", *(["unparsed"] if sweep else []), "NA rows", "error rows", "failed items",
            "example error ids", "wall time", "items/s per GPU", "rows added", "runs"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in rep.stages:
        cells = [s.name, _fmt(s.items_done), "-" if sweep else _fmt(s.removed),
                 *([_fmt(s.unparsed_rows)] if sweep else []), _fmt(s.na_rows) if sweep else "-", _fmt(s.error_rows),
                 _fmt(s.failed_items) if rep.kind == "pool" else "-", ", ".join(s.error_examples) or "-",
                 _hms(s.wall_s), "CPU" if s.cpu else _fmt(s.items_per_s_per_gpu, 2), _fmt(s.rows_added),
                 _fmt(s.runs)]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if rep.failures is not None:
        out += ["", f"Failures (data/logs/failures.jsonl): {rep.failures}"
                + (f", e.g. {', '.join(rep.failure_examples)}" if rep.failure_examples else "")]
    if rep.timing:
        out += ["", "## Timing per condition (p1_timing.jsonl)", "",
                "| condition | infer | infer_s/item | decode_s/item | prompt tokens/item |", "|---|---|---|---|---|"]
        out += [f"| {t['condition']} | {t['infer']} | {t['infer_s_per_item']} | {t['decode_s_per_item']} | "
                f"{t['prompt_tokens_per_item']} |" for t in rep.timing]
    if rep.analysis:
        out += ["", "## Sweep analysis", "", f"From `{rep.analysis['folder']}` ({rep.analysis['found_by']}):", ""]
        out += [f"- `{f['path']}` sha256 {f['sha256']}" for f in rep.analysis["files"]]
    out += ["", "## Server launch lines (logs/launch_params.txt, secrets redacted)", ""]
    out += ["```", *rep.launch_params, "```"] if rep.launch_params else ["unknown"]
    out += ["", "## Launcher changes", ""]
    any_change = False
    for s in rep.stages:
        if s.launcher_changes:
            any_change = True
            out.append(f"- {s.name}: " + "; ".join(s.launcher_changes))
    if not any_change:
        out.append("none detected" + ("" if rep.launch_params else " (no launch lines)"))
    assumed = [s.name for s in rep.stages if s.gpus_assumed]
    notes = rep.notes + ([f"{', '.join(assumed)}: the run log does not record GPUs per run; one GPU per run "
                          "(one client shard per GPU) is assumed for items/s per GPU"] if assumed else [])
    if notes:
        out += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    return "\n".join(out) + "\n"
