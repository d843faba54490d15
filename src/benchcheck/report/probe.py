"""The report's probe section: ``benchcheck probe``'s tables (per benchmark, the IBP curve, the
label flags) read from ``RESULTS/probe`` with the audit section's machinery, an IBP chart per
benchmark, and per item what the item browser shows beside the pyramid's evidence. A missing
folder gives a reason, never an exception; every text is escaped by the templates."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from benchcheck.report import svg
from benchcheck.report.audit import AuditData, TableSpec, _table, top_by

ProbeItems = dict[str, dict[str, Any]]  # item_id -> what the item view shows
MAX_IBP_CHARTS = 6
PROBE_TABLES = (
    TableSpec("probe_benchmarks.csv", "Text-only probe per benchmark: out-of-fold accuracy against chance, "
                                      "permutation p-values, blind gain over step 1, IBP"),
    TableSpec("label_flags.csv", "Possible label errors: the sources that see the most agree on one non-gold option "
                                 "(a list to check, never a removal)", top_by("agree", "min_margin")),
    TableSpec("probe_ibp.csv", "Iterative Bias Pruning, round by round", open=False),
)


def _rows(path: Path) -> list[list[str]]:
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as f:
            return list(csv.reader(f))
    except OSError:
        return []


def ibp_charts(rows: list[dict[str, str]]) -> list[str]:
    """Per benchmark (up to :data:`MAX_IBP_CHARTS`, those pruned most first): the probe's accuracy
    and chance against the items left."""
    by: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows:
        try:
            by.setdefault(r["bench"], []).append((float(r["items"]), float(r["accuracy"]), float(r["chance"])))
        except (KeyError, ValueError):
            continue
    charts = []
    for bench, pts in sorted(by.items(), key=lambda kv: -len(kv[1]))[:MAX_IBP_CHARTS]:
        if len(pts) < 2:
            continue
        pts.sort()
        xs = [p[0] for p in pts]
        charts.append(svg.lines(f"IBP: {bench}", xs, [("probe accuracy", "#d62728", [p[1] for p in pts]),
                                                      ("chance", "#9a9a9a", [p[2] for p in pts])],
                                ymax=1.0, xlabel="items left", ylabel="out-of-fold accuracy"))
    return charts


def read_probe(folder: Path) -> AuditData:
    data = AuditData(folder, label="probe")
    for spec in PROBE_TABLES:
        rows = _rows(folder / spec.name)
        if rows and len(rows) > 1:
            data.tables.append(_table(spec, rows))
    ibp = _rows(folder / "probe_ibp.csv")
    if ibp:
        data.charts = ibp_charts([dict(zip(ibp[0], r, strict=False)) for r in ibp[1:]])
    if not data.tables:
        data.reason = f"no probe in {folder} (run benchcheck probe --results RESULTS)"
    return data


def read_probe_items(folder: Path | None) -> ProbeItems:
    """Per item: the probe's option probabilities and pick, and its label flag with the evidence."""
    out: ProbeItems = {}
    if folder is None:
        return out
    try:
        import pyarrow.parquet as pq

        for r in pq.read_table(folder / "probe_items.parquet",
                               columns=["item_id", "probe_probs", "probe_pick", "probe_p_gold"]).to_pylist():
            out[str(r["item_id"])] = {"p": [round(float(v), 3) for v in r["probe_probs"] or []],
                                      "pick": r["probe_pick"], "pg": round(float(r["probe_p_gold"]), 3)}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    flags = _rows(folder / "label_flags.csv")
    for row in flags[1:]:
        r = dict(zip(flags[0], row, strict=False))
        rec = out.get(str(r.get("item_id")))
        if rec is not None:
            rec["flag"] = {"option": r.get("flagged_option"), "agree": r.get("agree"), "sources": r.get("sources"),
                           "evidence": r.get("evidence")}
    return out
