"""The audit section: the tables `benchcheck audit` wrote (the permutation null per benchmark x
step, the removal rate against the threshold, and, on the demo, the checks against the ground
truth), shown as they are, with the audit's one-sentence reading; and the per-item confidence
the item browser shows. A missing folder or table gives a reason to show, never an exception."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from benchcheck.protocol import LOG2
from benchcheck.report import svg

TABLES = (("audit_null.csv", "Removal rule against the permutation null (gold permuted within the benchmark)"),
          ("audit_thresholds.csv", "Removal rate against the margin threshold (0-3 nats)"),
          ("audit_fdr_target.csv", "--target-fdr: the smallest margin threshold whose false-discovery upper bound "
                                   "reaches the target, and the removals it keeps"),
          ("audit_truth.csv", "The audit checked against the ground truth (demo: false removals known by "
                              "construction; see audit_truth.md)"))
ITEMS = "audit_items.csv"
FDR_CURVE = "audit_fdr.csv"  # drawn (every benchmark and step together), not tabulated
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
    charts: list[str] = field(default_factory=list)  # inline SVG: the null vs observed, threshold curves

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
    data.charts = audit_charts(data.tables)
    fdr = fdr_chart(folder / FDR_CURVE)
    if fdr:
        data.charts.append(fdr)
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


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
MAX_BENCH_BARS = 12  # more benchmarks than this: one bar pair per step, pooled over benchmarks


def _records(tables: Iterable[AuditTable], name: str) -> list[dict[str, str]]:
    for t in tables:
        if t.name == name:
            return [dict(zip(t.header, r, strict=False)) for r in t.rows]
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
    return svg.lines("Estimated false-discovery share of the removals above a threshold", xs,
                     [("estimate", PALETTE[0], [v for _, v, _ in pts]),
                      ("upper bound", PALETTE[3], [v for *_, v in pts])],
                     ymax=1.0, vline=(LOG2, f"the protocol's threshold, log 2 = {LOG2:.3f}"),
                     xlabel="margin threshold (nats)", ylabel="share of chance removals")


def null_charts(rows: list[dict[str, str]]) -> list[str]:
    """Observed removal rate beside the permutation null's: per step, a bar pair per benchmark with
    the null's interval (pooled per step when there are many benchmarks)."""
    steps = sorted({int(r["step"]) for r in rows if r.get("step", "").isdigit()})
    benches = sorted({r.get("bench", "") for r in rows})
    colours = (("null", "#9a9a9a"), ("observed", "#1f77b4"))
    if len(benches) > MAX_BENCH_BARS:
        null, obs = [], []
        for step in steps:
            here = [r for r in rows if r.get("step") == str(step)]
            n = sum(_f(r, "items") or 0.0 for r in here) or 1.0
            null.append(sum((_f(r, "null_rate") or 0.0) * (_f(r, "items") or 0.0) for r in here) / n)
            obs.append(sum(_f(r, "removed") or 0.0 for r in here) / n)
        return [svg.bars("Removal rate: observed vs the null, pooled", [f"step {s}" for s in steps],
                         [(colours[0][0], colours[0][1], null), (colours[1][0], colours[1][1], obs)],
                         ymax=1.0, ylabel="removed share")]
    charts = []
    for step in steps:
        of_bench = {r.get("bench", ""): r for r in rows if r.get("step") == str(step)}
        labels = [b for b in benches if b in of_bench]
        null = [_f(of_bench[b], "null_rate") or 0.0 for b in labels]
        obs = [_f(of_bench[b], "observed_rate") or 0.0 for b in labels]
        err = [(_f(of_bench[b], "null_lo") or 0.0, _f(of_bench[b], "null_hi") or 0.0) for b in labels]
        charts.append(svg.bars(f"Step {step}: observed vs the null (95 %)", [b[:10] for b in labels],
                               [(colours[0][0], colours[0][1], null), (colours[1][0], colours[1][1], obs)],
                               ymax=1.0, err=err, ylabel="removed share"))
    return charts


def audit_charts(tables: Iterable[AuditTable]) -> list[str]:
    tables = list(tables)
    charts = null_charts(_records(tables, "audit_null.csv"))
    curve = threshold_chart(_records(tables, "audit_thresholds.csv"))
    return charts + ([curve] if curve else [])
