"""The ``confidence`` column of the assembled pool: how firmly each item's fate stands.

For a removed item, the confidence of the removal at the step that removed it; for a kept item,
the lowest confidence among the keep decisions of the steps that screened it (the weakest link:
any of them flipping would remove it). None where no step with letter log-probs decided it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from benchcheck.stats.cells import cell
from benchcheck.stats.cluster import rate_interval
from benchcheck.stats.confidence import confidences
from benchcheck.stats.source import read_forwards
from benchcheck.verdicts import ItemHashes


def add_confidence(records: Sequence[MutableMapping[str, Any]], results: str | Path,
                   current: ItemHashes | None = None) -> None:
    """Set ``record["confidence"]`` on every pool record (``item_id``, ``removed_at``), in place;
    ``current``: the items' fingerprints (a row of an item edited since is no evidence)."""
    ids = {str(r["item_id"]) for r in records}
    by_item: dict[tuple[str, str], dict[int, float | None]] = {}
    for c in confidences(read_forwards(results, ids, current=current)):  # by benchmark too: one id may be in two
        by_item.setdefault((c.bench, c.item_id), {})[c.step] = c.confidence
    for r in records:
        at = r.get("removed_at")
        key = (str(r.get("bench")), str(r["item_id"]))
        value = fate_confidence(by_item.get(key, {}), None if at is None else int(at))
        r["confidence"] = cell(value)


def fate_confidence(by_step: Mapping[int, float | None], removed_at: int | None) -> float | None:
    """An item's confidence from its steps' (module docstring): the removing step's, else the
    lowest of its keep decisions'."""
    if removed_at is not None:
        return by_step.get(removed_at)
    known = [v for v in by_step.values() if v is not None]
    return min(known) if known else None


def removal_interval(removed: Sequence[bool], videos: Sequence[str]) -> dict[str, float | None]:
    """``removal_lo`` / ``removal_hi``: the removal rate's 95 % interval clustered by video
    (``stats.cluster.rate_interval``), for ``pool_summary``; None where nothing was decided."""
    lo, hi = rate_interval(removed, videos) if removed else (None, None)
    return {"removal_lo": cell(lo), "removal_hi": cell(hi)}


PROBE_COLUMNS = ("probe_p_gold", "probe_pick", "probe_margin", "label_flag", "label_flag_option", "label_flag_agree",
                 "label_flag_evidence")


def add_probe(records: Sequence[MutableMapping[str, Any]], probe_dir: str | Path | None) -> None:
    """Set the probe's and the label flags' columns on every pool record, in place, from a
    ``benchcheck probe`` folder (``probe_items.parquet``, ``label_flags.csv``): the out-of-fold
    probability of the gold, the probe's pick and margin, and whether the item is flagged as a
    possible label error (with the option the sources agree on, how many, and their evidence).
    Every column is present (None) when there is no probe folder (``probe_dir`` None: one not to
    read) or the item was not probed; ``label_flag`` is False for a probed item that is not flagged,
    None where no flags were made."""
    import csv

    import pyarrow.parquet as pq

    probed: dict[str, dict[str, Any]] = {}
    flags: dict[str, dict[str, str]] | None = None
    if probe_dir is not None:
        d = Path(probe_dir)
        try:
            for r in pq.read_table(d / "probe_items.parquet",
                                   columns=["item_id", "probe_p_gold", "probe_pick", "probe_margin"]).to_pylist():
                probed[str(r["item_id"])] = r
        except (OSError, ValueError, KeyError):
            probed = {}
        try:
            with (d / "label_flags.csv").open(newline="", encoding="utf-8") as f:
                flags = {r["item_id"]: r for r in csv.DictReader(f) if r.get("item_id")}
        except (OSError, ValueError, KeyError):
            flags = None
    for r in records:
        iid = str(r["item_id"])
        p = probed.get(iid)
        fl = flags.get(iid) if flags is not None else None
        r["probe_p_gold"] = cell(p["probe_p_gold"]) if p else None
        r["probe_pick"] = p["probe_pick"] if p else None
        r["probe_margin"] = cell(p["probe_margin"]) if p else None
        r["label_flag"] = (fl is not None) if flags is not None and p is not None else None
        r["label_flag_option"] = fl["flagged_option"] if fl else None
        r["label_flag_agree"] = int(fl["agree"]) if fl else None
        r["label_flag_evidence"] = fl["evidence"] if fl else None
