"""The item browser's data: per benchmark, small list chunks (what filtering reads) and detail
chunks (what opening an item reads), each a ``.js`` file that calls ``BC_DATA(key, payload)``.

Script tags are the one way a page opened from ``file://`` can load data (fetch and XHR are
refused there), so the page adds a ``<script>`` per chunk when it needs it and drops chunks it
no longer needs; it never holds the whole pool.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchcheck.report.source import ItemEvidence
from benchcheck.report.sweep import SweepAnswer
from benchcheck.stats.pool import fate_confidence

LIST_CHUNK = 500  # items per list chunk: about 50-70 KB, so the first page stays small
DETAIL_CHUNK = 100  # items per detail chunk
QUESTION_CHARS = 90  # searchable question prefix kept in the list chunks
FATE_CODE = {"kept": "k", "removed": "r", "failed": "f", "error": "e", "pending": "p", "not_screened": "n",
             "not_reached": "-", "open_format": "o"}
# What each code means (the item browser's legend and the fates cell's tooltip).
FATE_MEANING = {"kept": "kept by the step", "removed": "removed by the step",
                "failed": "failed for good (errors past the retry limit)", "error": "an error row, to be retried",
                "pending": "not screened yet", "not_screened": "not screened: no frames for a visual step",
                "not_reached": "not reached (removed earlier, or stopped at an earlier step)",
                "open_format": "open-format item (not multiple choice: never screened)"}
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# What the item view shows per step; the rest of a row (tokens, latency, host...) stays in the rows.
STEP_FIELDS = ("perms", "gold_pos", "picks", "pick", "margins", "margin", "mean_margin", "hits", "removed", "model")


def slug(bench: str) -> str:
    """A file-name-safe folder name per benchmark (a short hash keeps altered names distinct)."""
    if SAFE_NAME.match(bench):
        return bench
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", bench)[:80].lstrip("._-") or "bench"
    return f"{clean}-{hashlib.sha1(bench.encode()).hexdigest()[:8]}"


def safe_video_id(video_id: str | None) -> str | None:
    """Only ids that are plain names become frame paths: an item file can never point outside."""
    return video_id if video_id and SAFE_NAME.match(video_id) and ".." not in video_id else None


def _r(x: Any) -> Any:
    """Floats to 3 decimals (one level of lists, or two for step 1's per-permutation log-probs)."""
    if isinstance(x, float):
        return round(x, 3) if math.isfinite(x) else None
    if isinstance(x, list) and x:
        first = x[0]
        if isinstance(first, list):
            return [[round(v, 3) if isinstance(v, float) and math.isfinite(v) else v for v in sub]
                    if isinstance(sub, list) else sub for sub in x]
        if isinstance(first, float):
            return [round(v, 3) if isinstance(v, float) and math.isfinite(v) else v for v in x]
    return x


ROUNDED = frozenset({"lp", "margins", "margin", "mean_margin", "latency_s"})


def step_evidence(step: int, fate: str, row: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"s": step, "f": fate}
    if row is None:
        return out
    if row.get("status", "ok") != "ok":
        out["err"] = str(row.get("error") or row.get("error_kind") or "error")[:300]
        return out
    for k in STEP_FIELDS:
        if k in row:
            out[k] = _r(row[k]) if k in ROUNDED else row[k]
    out["lp"] = _r(row.get("lp"))
    perm = row.get("perm")
    if isinstance(perm, list) and perm != list(range(len(perm))):
        out["perm"] = perm  # a single forward in the original order needs no permutation
    fr = row.get("frames")
    if isinstance(fr, dict) and isinstance(fr.get("positions"), list):
        pos = fr["positions"]
        # the time-ordered grid is the common case: "n frames in order" instead of n numbers
        out["frames"] = len(pos) if pos == list(range(len(pos))) else [p for p in pos if isinstance(p, int)]
    return out


def detail_record(ev: ItemEvidence, chain: Sequence[int], sweep: Sequence[SweepAnswer],
                  conf: Mapping[int, float] | None = None, probe: Mapping[str, Any] | None = None) -> dict[str, Any]:
    it = ev.item
    rec: dict[str, Any] = {"id": it.item_id, "q": it.question, "o": list(it.options), "a": it.answer,
                           "task": it.task, "vid": safe_video_id(it.video_id), "raw_vid": it.video_id,
                           "final": ev.final, "removed_at": ev.removed_at,
                           "steps": [step_evidence(s, ev.fates.get(s, "not_reached"), ev.rows.get(s))
                                     for s in chain if s in ev.fates]}
    if conf:
        for st in rec["steps"]:
            if st["s"] in conf and "err" not in st:
                st["conf"] = _r(conf[st["s"]])
        rec["conf"] = _r(item_confidence(ev, conf))
    if ev.removed_at == 0 and 0 in ev.rows:  # a step-0 duplicate: why, and of what; no step saw it
        rec["step0"] = dict(ev.rows[0])
        rec["steps"] = []
    if it.meta.get("from_rows"):
        rec["no_text"] = True
    if sweep:
        rec["sweep"] = [[a.condition, a.pred, a.correct, a.status] for a in sweep]
    if probe:
        rec["probe"] = dict(probe)  # the text-only probe's probabilities and its label flag (docs/probe.md)
    return rec


def decisive_margin(ev: ItemEvidence, chain: Sequence[int]) -> float | None:
    """The margin at the step that removed the item, else at the last step that screened it."""
    if ev.removed_at is not None:
        return ev.margins.get(ev.removed_at)
    last = [m for s in chain if (m := ev.margins.get(s)) is not None]
    return last[-1] if last else None


def item_confidence(ev: ItemEvidence, conf: Mapping[int, float]) -> float | None:
    """The confidence of the item's fate (the pool's rule, ``stats.pool.fate_confidence``) over the
    steps that decided it."""
    decided = {s: v for s, v in conf.items() if ev.fates.get(s) in ("kept", "removed")}
    return fate_confidence(decided, ev.removed_at)


@dataclass(slots=True)
class BenchChunks:
    bench: str
    slug: str
    n: int = 0
    list_files: list[str] = field(default_factory=list)
    detail_files: int = 0
    tasks: list[str] = field(default_factory=list)
    bytes_written: int = 0

    def index_entry(self) -> dict[str, Any]:
        return {"name": self.bench, "slug": self.slug, "n": self.n, "lists": self.list_files, "tasks": self.tasks}


def _payload(key: str, data: Any) -> bytes:
    return b"BC_DATA(" + orjson.dumps(key) + b"," + orjson.dumps(data) + b");\n"


def write_file(path: Path, data: bytes) -> None:
    """A plain write: the whole report is built in a staging folder and published by one rename
    (see ``site.publish``), so single files need no fsync of their own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_bench(out: Path, bench: str, items: Sequence[ItemEvidence], chain: Sequence[int],
                sweep: Mapping[str, Sequence[SweepAnswer]],
                conf: Mapping[str, Mapping[int, float]] | None = None,
                probe: Mapping[str, Mapping[str, Any]] | None = None) -> BenchChunks:
    """Write one benchmark's list and detail chunks under ``out/data/<slug>/``; ``conf`` is the
    audit's confidence per item and step (``report.audit.read_confidences``), when there is one."""
    conf = conf or {}
    probe = probe or {}
    bc = BenchChunks(bench, slug(bench), len(items))
    folder = out / "data" / bc.slug
    tasks: dict[str, int] = {}
    rows = []
    for j in range(0, len(items), DETAIL_CHUNK):
        part = items[j: j + DETAIL_CHUNK]
        d = j // DETAIL_CHUNK
        key = f"{bc.slug}/d{d}"
        text = _payload(key, [detail_record(ev, chain, sweep.get(ev.item.item_id, ()), conf.get(ev.item.item_id),
                                            probe.get(ev.item.item_id)) for ev in part])
        write_file(folder / f"d{d}.js", text)
        bc.bytes_written += len(text)
        bc.detail_files += 1
        for ev in part:
            t = tasks.setdefault(ev.item.task or "", len(tasks))
            c = conf.get(ev.item.item_id, {})
            rows.append([ev.item.item_id, t, FATE_CODE.get(ev.final, "?"), ev.removed_at or 0,
                         "".join(FATE_CODE.get(ev.fates.get(s, "not_reached"), "?") for s in chain),
                         [_r(ev.margins.get(s)) for s in chain], _r(decisive_margin(ev, chain)), d,
                         ev.item.question[:QUESTION_CHARS], _r(item_confidence(ev, c)) if c else None,
                         [_r(c.get(s)) for s in chain] if c else None])
    bc.tasks = list(tasks)
    for j in range(0, len(rows), LIST_CHUNK):
        name = f"l{j // LIST_CHUNK}"
        text = _payload(f"{bc.slug}/{name}", rows[j: j + LIST_CHUNK])
        write_file(folder / f"{name}.js", text)
        bc.bytes_written += len(text)
        bc.list_files.append(name)
    return bc


# Positions in a list row (browser.js reads them by index); confidence fields are null without an audit.
LIST_FIELDS = ["id", "task", "final", "removed_at", "fates", "margins", "margin", "detail", "question",
               "confidence", "confidences"]


def write_index(out: Path, benches: Sequence[BenchChunks], chain: Sequence[int], frames_base: str | None) -> int:
    data = {"chain": list(chain), "fields": LIST_FIELDS, "codes": FATE_CODE, "meanings": FATE_MEANING,
            "frames": frames_base,
            "benches": [b.index_entry() for b in benches]}
    text = _payload("index", data)
    write_file(out / "data" / "index.js", text)
    return len(text)
