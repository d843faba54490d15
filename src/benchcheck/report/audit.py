"""The audit section: a summary of every table `benchcheck audit` wrote (``audit_*.csv``), each
with a link to the full CSV copied beside the page, the audit's one-sentence reading, its figures,
and the per-item confidence the item browser shows. A missing folder or table gives a reason to
show, never an exception.

One section per CSV: :data:`TABLES` names the known ones (title, order, and how to summarize);
any other ``audit_*.csv`` a later audit writes gets a section of its own, titled by its file name,
showing its first rows. To give a new table a better summary, add a :class:`TableSpec`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchcheck.protocol import LOG2
from benchcheck.report import svg

TOP_ROWS = 10  # rows a summarized table shows (the full CSV is linked)
FDR_CURVE = "audit_fdr.csv"  # drawn (every benchmark and step together); the table folded
NOTE_CHARS = 40  # a repeated cell longer than this is said once, under its table
ITEMS = "audit_items.csv"  # per item and step: read into the item browser, not shown as a table

Confidences = dict[str, dict[int, float]]  # item_id -> step -> confidence
Rows = list[list[str]]


@dataclass(frozen=True, slots=True)
class AuditTable:
    name: str
    title: str
    header: list[str]
    rows: Rows  # what the page shows (a summary)
    notes: tuple[str, ...] = ()  # columns with one value in every row, said once under the table
    total: int = 0  # rows in the CSV
    how: str = ""  # how the shown rows were chosen ("" : all of them)
    href: str | None = None  # the full CSV, relative to the page (set when the site copies it)
    open: bool = True  # shown unfolded
    full_header: list[str] = field(default_factory=list)  # the CSV as written (the charts read it)
    full_rows: Rows = field(default_factory=list)


Summary = Callable[[list[str], Rows], tuple[list[str], Rows, str]]  # (header, rows, how chosen)


def _num(v: str) -> float | None:
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _cell(v: str) -> str:
    """Long decimals cut to 4 significant digits for reading (the CSV keeps them all)."""
    x = _num(v)
    if x is None or "." not in v or len(v) <= 7:
        return v
    return f"{x:.4g}"


def first_rows(header: list[str], rows: Rows) -> tuple[list[str], Rows, str]:
    if len(rows) <= TOP_ROWS:
        return header, rows, ""
    return header, rows[:TOP_ROWS], f"the first {TOP_ROWS} rows"


def top_by(*columns: str) -> Summary:
    """The rows with the largest values of ``columns`` (in turn), top :data:`TOP_ROWS`."""
    def summary(header: list[str], rows: Rows) -> tuple[list[str], Rows, str]:
        ix = [header.index(c) for c in columns if c in header]
        if len(rows) <= TOP_ROWS or not ix:
            return first_rows(header, rows)

        def key(r: list[str]) -> tuple[float, ...]:
            return tuple(-(_num(r[j]) or 0.0) for j in ix)
        return header, sorted(rows, key=key)[:TOP_ROWS], \
            f"the {TOP_ROWS} rows with the most {', then '.join(header[j] for j in ix)}"
    return summary


def columns_first(first: tuple[str, ...], inner: Summary) -> Summary:
    """``inner``'s summary with ``first`` (those the table has) as its leading columns, in that
    order, and the others after them: what a reader needs first stays in view."""
    def summary(header: list[str], rows: Rows) -> tuple[list[str], Rows, str]:
        head, shown, note = inner(header, rows)
        lead = [c for c in first if c in head]
        order = [head.index(c) for c in lead] + [i for i, c in enumerate(head) if c not in lead]
        return [head[i] for i in order], [[r[i] if i < len(r) else "" for i in order] for r in shown], note
    return summary


NULL_FIRST = ("bench", "step", "items", "removed", "observed_rate", "cond_null_rate", "p_value", "p_adjusted",
              "excess_called", "est_false_removals", "est_false_lo", "est_false_hi")

THRESHOLDS_SHOWN = (0.0, 0.5, LOG2, 1.0, 1.5, 2.0, 3.0)


def thresholds_by_step(header: list[str], rows: Rows) -> tuple[list[str], Rows, str]:
    """The removal rate against the threshold pooled over benchmarks: a row per step, a column per
    threshold of :data:`THRESHOLDS_SHOWN` that the table has (the protocol's log 2 among them)."""
    need = ("step", "threshold", "items", "removed")
    if any(c not in header for c in need):
        return first_rows(header, rows)
    j = {c: header.index(c) for c in need}
    pooled: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        t, n, k = _num(r[j["threshold"]]), _num(r[j["items"]]), _num(r[j["removed"]])
        if t is None or n is None or k is None:
            continue
        acc = pooled.setdefault(r[j["step"]], {}).setdefault(round(t, 4), [0.0, 0.0])
        acc[0] += k
        acc[1] += n
    present = sorted({t for per in pooled.values() for t in per})
    cols = [t for t in present if any(abs(t - w) < 1e-3 for w in THRESHOLDS_SHOWN)]
    head = ["step"] + [f"{'log 2' if abs(t - LOG2) < 1e-3 else f'{t:g}'}" for t in cols]
    body = [[step] + [f"{100 * per[t][0] / per[t][1]:.1f}%" if t in per and per[t][1] else "-" for t in cols]
            for step, per in sorted(pooled.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0)]
    return head, body, ("removed share per step at a few thresholds (nats), pooled over benchmarks "
                        "(items-weighted); the full table has every benchmark and threshold")


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    title: str
    summary: Summary = first_rows
    open: bool = True  # False: the section starts folded (secondary tables keep the page short)


TABLES = (
    TableSpec("audit_null.csv", "Removal rule against the null (conditioned on the steps passed; the permutation "
                                "null, gold permuted within the benchmark, beside it)",
              columns_first(NULL_FIRST, top_by("est_false_removals", "removed"))),
    TableSpec("audit_thresholds.csv", "Removal rate against the margin threshold (0-3 nats)", thresholds_by_step),
    TableSpec("audit_fdr_target.csv", "--target-fdr: the smallest margin threshold whose false-discovery upper bound "
                                      "reaches the target, and the removals it keeps"),
    TableSpec("audit_truth.csv", "The audit checked against the ground truth (demo: false removals known by "
                                 "construction; see audit_truth.md)"),
    TableSpec("audit_prior_effects.csv", "What the model's letter prior explains, per benchmark and step",
              top_by("prior_explained", "removed"), open=False),
    TableSpec("audit_priors.csv", "The model's letter prior per step", open=False),
    TableSpec("audit_profile.csv", "The benchmark profile (gaps with 95 % intervals)", open=False),
    TableSpec("audit_floor.csv", "Log-prob floor: decisions with exact log-probs against the top-20 floor",
              top_by("decisions_differ", "floored"), open=False),
    TableSpec(FDR_CURVE, "The false-discovery curve per benchmark and step (drawn above, pooled)", open=False),
)


def _table(spec: TableSpec, rows: Rows) -> AuditTable:
    """A CSV table as shown: summarized, and a long column that repeats one value (the rule) said
    once as a note."""
    header, body = rows[0], [r + [""] * (len(rows[0]) - len(r)) for r in rows[1:]]
    same = [j for j in range(len(header))
            if body and len({r[j] for r in body}) == 1 and len(body[0][j]) > NOTE_CHARS]
    notes = tuple(f"{header[j]}: {body[0][j]}" for j in same)
    keep = [j for j in range(len(header)) if j not in same]
    short_h, short = [header[j] for j in keep], [[r[j] for j in keep] for r in body]
    shown_h, shown, how = spec.summary(short_h, short)
    return AuditTable(spec.name, spec.title, shown_h, [[_cell(c) for c in r] for r in shown], notes, len(body), how,
                      open=spec.open, full_header=header, full_rows=body)


@dataclass(slots=True)
class AuditData:
    folder: Path | None
    reason: str | None = None
    tables: list[AuditTable] = field(default_factory=list)
    headline: str | None = None  # audit.md's reading of the null, one sentence
    truth: str | None = None  # audit_truth.md's result line
    label: str = ""
    charts: list[str] = field(default_factory=list)  # inline SVG: the null vs observed, threshold curves
    chart_notes: list[str] = field(default_factory=list)  # what has no chart, and why

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


def _specs(folder: Path) -> list[TableSpec]:
    """The known tables in :data:`TABLES`' order, then any other ``audit_*.csv`` by name."""
    known = {t.name for t in TABLES}
    extra = sorted(p.name for p in folder.glob("audit_*.csv") if p.name not in known and p.name != ITEMS)
    return [*TABLES, *(TableSpec(n, n.removesuffix(".csv").replace("_", " ").capitalize()) for n in extra)]


def read_audit(folder: Path | None) -> AuditData:
    if folder is None:
        return AuditData(None, "no audit folder given (--audit)")
    data = AuditData(folder, label=folder.name)
    for spec in _specs(folder):
        try:
            with (folder / spec.name).open(newline="", encoding="utf-8", errors="replace") as f:
                rows = list(csv.reader(f))
        except OSError:
            continue
        if rows:
            data.tables.append(_table(spec, rows))
    data.charts, data.chart_notes = audit_charts(data.tables)
    fdr = fdr_chart(folder / FDR_CURVE)
    if fdr:
        data.charts.append(fdr)
    data.headline = _bold_line(folder / "audit.md")
    data.truth = _bold_line(folder / "audit_truth.md")
    if not data.tables:
        data.reason = f"no audit tables in {folder} (expected {', '.join(t.name for t in TABLES[:2])})"
    return data


def link_tables(data: AuditData, out: Path, under: str) -> None:
    """Copy each table's CSV to ``out/under/<name>`` and link it from its section."""
    import shutil

    if data.folder is None:
        return
    (out / under).mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(data.tables):
        try:
            shutil.copyfile(data.folder / t.name, out / under / t.name)
        except OSError:
            continue
        data.tables[i] = replace(t, href=f"{under}/{t.name}")


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


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
MAX_BENCH_BARS = 12  # more benchmarks than this: one bar pair per step, pooled over benchmarks


def _records(tables: Iterable[AuditTable], name: str) -> list[dict[str, str]]:
    for t in tables:
        if t.name == name:
            return [dict(zip(t.full_header, r, strict=False)) for r in t.full_rows]
    return []


def _f(row: dict[str, str], key: str) -> float | None:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return None


def threshold_chart(rows: list[dict[str, str]]) -> str | None:
    """Removal rate against the threshold, one line per step, pooled over benchmarks (items-weighted)."""
    pooled: dict[int, dict[float, list[float]]] = {}
    for r in rows:
        t, items, removed = _f(r, "threshold"), _f(r, "items"), _f(r, "removed")
        if t is None or items is None or removed is None or not r.get("step", "").isdigit():
            continue
        acc = pooled.setdefault(int(r["step"]), {}).setdefault(t, [0.0, 0.0])
        acc[0] += removed
        acc[1] += items
    if not pooled:
        return None
    xs = sorted({t for per in pooled.values() for t in per})
    series = [(f"step {step}", PALETTE[i % len(PALETTE)],
               [per[t][0] / per[t][1] if t in per and per[t][1] else 0.0 for t in xs])
              for i, (step, per) in enumerate(sorted(pooled.items()))]
    return svg.lines("Removal rate against the threshold", xs, series, ymax=1.0,
                     vline=(LOG2, f"the protocol's threshold, log 2 = {LOG2:.3f}"),
                     xlabel="margin threshold (nats)", ylabel="removed share")


def fdr_chart(path: Path) -> str | None:
    """The false-discovery curve over every benchmark and step: the estimated share of chance
    removals among those above each margin threshold, and its upper bound."""
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as f:
            rows = [r for r in csv.DictReader(f) if r.get("bench") == "*" and r.get("step") == "*"]
    except OSError:
        return None
    pts = sorted((t, _f(r, "fdr") or 0.0, _f(r, "fdr_hi") or 0.0)
                 for r in rows if (t := _f(r, "threshold")) is not None)
    if not pts:
        return None
    xs = [t for t, _, _ in pts]
    return svg.lines("The false-discovery share above a threshold", xs,
                     [("estimate", PALETTE[0], [v for _, v, _ in pts]),
                      ("upper bound", PALETTE[3], [v for *_, v in pts])],
                     ymax=1.0, vline=(LOG2, f"the protocol's threshold, log 2 = {LOG2:.3f}"),
                     xlabel="margin threshold (nats)", ylabel="share of chance removals")


def _null_columns(rows: list[dict[str, str]]) -> tuple[str, str, str, str]:
    """(rate, lo, hi, name) of the null a chart draws: the conditioned null, the one the audit's
    headline and calls use; the permutation null, named as such, only for a table written before
    the conditioned one existed. The permutation null is unconditioned: at a step run on an
    earlier step's survivors it expects the lucky guesses the earlier step removed."""
    if any(_f(r, "cond_null_rate") is not None for r in rows):
        return "cond_null_rate", "cond_null_lo", "cond_null_hi", "null"
    return "null_rate", "null_lo", "null_hi", "permutation null"


def null_charts(rows: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """Observed removal rate beside the null's (the conditioned null, ``_null_columns``): per step, a
    bar pair per benchmark with the null's interval (pooled per step when there are many benchmarks).
    A step where nothing was removed and the null expects nothing gets no (empty) chart, but a note;
    returns (charts, notes)."""
    steps = sorted({int(r["step"]) for r in rows if r.get("step", "").isdigit()})
    benches = sorted({r.get("bench", "") for r in rows})
    rate, lo_col, hi_col, name = _null_columns(rows)
    colours = ((name, "#9a9a9a"), ("observed", "#1f77b4"))
    if len(benches) > MAX_BENCH_BARS:
        null, obs = [], []
        for step in steps:
            here = [r for r in rows if r.get("step") == str(step)]
            n = sum(_f(r, "items") or 0.0 for r in here) or 1.0
            null.append(sum((_f(r, rate) or 0.0) * (_f(r, "items") or 0.0) for r in here) / n)
            obs.append(sum(_f(r, "removed") or 0.0 for r in here) / n)
        return [svg.bars(f"Removal rate: observed vs the {name}, pooled", [f"step {s}" for s in steps],
                         [(colours[0][0], colours[0][1], null), (colours[1][0], colours[1][1], obs)],
                         ymax=1.0, ylabel="removed share")], []
    charts, flat = [], []
    for step in steps:
        of_bench = {r.get("bench", ""): r for r in rows if r.get("step") == str(step)}
        labels = [b for b in benches if b in of_bench]
        null = [_f(of_bench[b], rate) or 0.0 for b in labels]
        obs = [_f(of_bench[b], "observed_rate") or 0.0 for b in labels]
        err = [(_f(of_bench[b], lo_col) or 0.0, _f(of_bench[b], hi_col) or 0.0) for b in labels]
        if not any(null + obs + [hi for _, hi in err]):
            flat.append(step)
            continue
        charts.append(svg.bars(f"Step {step}: observed vs the {name} (95 %)", labels,
                               [(colours[0][0], colours[0][1], null), (colours[1][0], colours[1][1], obs)],
                               ymax=1.0, err=err, ylabel="removed share"))
    notes = []
    if flat:
        which = ", ".join(map(str, flat))
        notes.append(f"Step{'s' if len(flat) > 1 else ''} {which}: no chart — nothing removed and the {name} "
                     "expects no removal (every rate 0; the table has the rows).")
    return charts, notes


def audit_charts(tables: Iterable[AuditTable]) -> tuple[list[str], list[str]]:
    """The figures drawn from the CSVs as written, and notes on what has no figure."""
    tables = list(tables)
    charts, notes = null_charts(_records(tables, "audit_null.csv"))
    curve = threshold_chart(_records(tables, "audit_thresholds.csv"))
    return charts + ([curve] if curve else []), notes
