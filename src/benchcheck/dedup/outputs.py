"""Step-0 output files. Each is written to a temporary name and renamed, so a killed run leaves
either the old file or the new one, never half of one; a rerun rewrites them all the same way."""

from __future__ import annotations

import csv
import functools
import io
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from benchcheck.atomic import write_atomic
from benchcheck.dedup.run import DedupResult
from benchcheck.dedup.verdict import ItemVerdict, gold_text
from benchcheck.items import Item
from benchcheck.protocol import LETTERS

KEPT_FILE = "step0_kept.parquet"
REMOVED_FILE = "step0_removed.jsonl"
COUNTS_FILE = "screen_counts_full.csv"
SUMMARY_FILE = "step0_summary.md"
# gold_conflict comes last: a reader of the older columns, by name or by position, reads them unchanged
COUNT_COLUMNS = ("bench", "items", "exact", "near", "cross_bench", "kept", "gold_conflict")
EXAMPLES_PER_KIND = 3
CONFLICTS_LISTED = 20  # the summary lists this many gold conflicts; step0_removed.jsonl has them all


@dataclass(frozen=True, slots=True)
class BenchCounts:
    """One row of ``screen_counts_full.csv``; ``cross_bench`` counts removed items (exact, near or
    gold conflicts) whose kept original is in another benchmark, so
    ``items = kept + exact + near + gold_conflict``."""

    bench: str
    items: int
    exact: int
    near: int
    cross_bench: int
    kept: int
    gold_conflict: int = 0


def bench_counts(verdicts: Sequence[ItemVerdict]) -> list[BenchCounts]:
    """Counts per benchmark in the order benchmarks first appear."""
    c: dict[str, Counter[str]] = {}
    for v in verdicts:
        k = c.setdefault(v.item.bench, Counter())
        k["items"] += 1
        k[v.verdict] += 1
        k["cross_bench"] += v.kind == "cross"
    return [BenchCounts(b, k["items"], k["exact"], k["near"], k["cross_bench"], k["kept"], k["gold_conflict"])
            for b, k in c.items()]


def gold_label(answer: int) -> str:
    """The gold as a letter (``A`` for 0), or its index where the item has more options than letters
    (or as given where it is no index: only the Python API can hand step 0 such an item)."""
    ok = isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(LETTERS)
    return LETTERS[answer] if ok else str(answer)


def gold_conflicts(verdicts: Sequence[ItemVerdict]) -> list[ItemVerdict]:
    return [v for v in verdicts if v.verdict == "gold_conflict"]


def _gold(item: Item, with_text: bool) -> str:
    """``gold C``, or ``gold C "a book"`` where the letters of two items need not name one list."""
    text = gold_text(item) if with_text else None
    return f"gold {gold_label(item.answer)}" + (f" {json.dumps(text, ensure_ascii=False)}" if text is not None else "")


def conflict_warning(verdicts: Sequence[ItemVerdict]) -> str | None:
    """One line for the command: how many gold conflicts, and the first pair; None without any."""
    found = gold_conflicts(verdicts)
    if not found:
        return None
    first = found[0]
    assert first.duplicate_of is not None
    near = sum(v.near_match for v in found)
    what = ("same question, options and video, another gold" if not near else
            f"same question and video, another gold; {near} of them near duplicates whose gold options differ in text")
    texts = first.near_match  # a near duplicate's letters may name other options: show the texts
    return (f"{len(found)} gold conflict{'s' if len(found) != 1 else ''} ({what}), first: {first.item.item_id} "
            f"({first.item.bench}) {_gold(first.item, texts)} against {first.duplicate_of.item_id} "
            f"({first.duplicate_of.bench}) {_gold(first.duplicate_of, texts)}; both golds are in {REMOVED_FILE}")


def unchecked_golds(verdicts: Sequence[ItemVerdict]) -> list[ItemVerdict]:
    return [v for v in verdicts if v.gold_unchecked]


def unchecked_warning(verdicts: Sequence[ItemVerdict]) -> str | None:
    """One line for the duplicates whose golds were not compared; None without any."""
    found = unchecked_golds(verdicts)
    if not found:
        return None
    first = found[0]
    assert first.duplicate_of is not None
    return (f"{len(found)} duplicate{'s' if len(found) != 1 else ''} not checked for a gold conflict (a gold missing "
            f"or out of range), first: {first.item.item_id} ({first.item.bench}) against "
            f"{first.duplicate_of.item_id} ({first.duplicate_of.bench})")


def _write(data: bytes, f: BinaryIO) -> None:
    f.write(data)


def kept_table_bytes(verdicts: Sequence[ItemVerdict]) -> bytes:
    """``step0_kept.parquet``: every item with its verdict (the file ``screen --keep`` reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("item_id", pa.string()), ("bench", pa.string()), ("video_id", pa.string()), ("kept", pa.bool_()),
        ("verdict", pa.string()), ("duplicate_of", pa.string()), ("similarity", pa.float64()),
        ("kind", pa.string()),
    ])
    rows = [{
        "item_id": v.item.item_id, "bench": v.item.bench, "video_id": v.item.video_id, "kept": v.kept,
        "verdict": v.verdict, "duplicate_of": v.duplicate_of.item_id if v.duplicate_of else None,
        "similarity": None if v.similarity is None else round(v.similarity, 6), "kind": v.kind,
    } for v in verdicts]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf)
    return buf.getvalue()


def removed_record(v: ItemVerdict) -> dict[str, Any]:
    """One line of ``step0_removed.jsonl``: the removed item, the kept item it duplicates, and both
    texts; a gold conflict adds both golds (option indexes, which its texts do not show), the gold
    options' texts, and whether it matched as an exact or a near duplicate."""
    assert v.duplicate_of is not None
    rec: dict[str, Any] = {
        "item_id": v.item.item_id, "bench": v.item.bench, "video_id": v.item.video_id, "verdict": v.verdict,
        "kind": v.kind, "similarity": None if v.similarity is None else round(v.similarity, 6),
        "duplicate_of": v.duplicate_of.item_id, "duplicate_bench": v.duplicate_of.bench,
        "text": v.text, "duplicate_text": v.duplicate_text,
    }
    if v.verdict == "gold_conflict":
        rec["gold"], rec["duplicate_gold"] = v.item.answer, v.duplicate_of.answer
        rec["gold_text"], rec["duplicate_gold_text"] = gold_text(v.item), gold_text(v.duplicate_of)
        rec["match"] = v.match
    return rec


def counts_csv(counts: Sequence[BenchCounts]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COUNT_COLUMNS)
    for c in counts:
        w.writerow([c.bench, c.items, c.exact, c.near, c.cross_bench, c.kept, c.gold_conflict])
    return buf.getvalue()


def _quote(text: str) -> str:
    return " / ".join(line.replace("|", "\\|") for line in text.splitlines())[:200]


def summary_markdown(result: DedupResult, counts: Sequence[BenchCounts]) -> str:
    """A short report: totals, the per-benchmark table, and examples of each kind of duplicate."""
    v = result.verdicts
    total = Counter(x.verdict for x in v)
    cross = sum(x.kind == "cross" for x in v)
    s = result.stats
    lines = [
        "# Step 0: duplicate items",
        "",
        f"Model `{result.model}`, cosine threshold {result.threshold:g}. {len(v)} items: "
        f"{total['kept']} kept, {total['exact']} exact and {total['near']} near duplicates"
        + (f" and {total['gold_conflict']} gold conflicts (below)" if total["gold_conflict"] else "")
        + f" removed ({cross} of them copies of an item in another benchmark).",
        f"{s.groups} groups of one video (or of one benchmark's items without a video) compared; "
        f"the largest held {s.largest_group} distinct texts.",
        "",
        "| benchmark | items | exact | near | cross-benchmark | kept | gold conflicts |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {c.bench} | {c.items} | {c.exact} | {c.near} | {c.cross_bench} | {c.kept} | {c.gold_conflict} |"
              for c in counts]
    unchecked = unchecked_warning(v)
    if unchecked:
        lines += ["", unchecked[0].upper() + unchecked[1:] + "."]
    conflicts = gold_conflicts(v)
    if conflicts:
        lines += ["", "## Gold conflicts", "",
                  "The same question and video with another gold: the same options, or a near duplicate whose "
                  "gold option reads as another text. At most one of the two golds is right. "
                  "The kept item is screened with its gold; fix the wrong file and rerun.", ""]
        for x in conflicts[:CONFLICTS_LISTED]:
            assert x.duplicate_of is not None and x.duplicate_text is not None
            if not x.near_match:
                lines.append(f"- `{x.item.item_id}` ({x.item.bench}, {_gold(x.item, False)}) has the text of "
                             f"`{x.duplicate_of.item_id}` ({x.duplicate_of.bench}, {_gold(x.duplicate_of, False)}): "
                             f"{_quote(x.text)}")
                continue
            lines.append(f"- `{x.item.item_id}` ({x.item.bench}, {_gold(x.item, True)}) is a near duplicate of "
                         f"`{x.duplicate_of.item_id}` ({x.duplicate_of.bench}, {_gold(x.duplicate_of, True)}), "
                         f"similarity {x.similarity:.3f}")
            lines.append(f"  - removed: {_quote(x.text)}")
            lines.append(f"  - kept: {_quote(x.duplicate_text)}")
        if len(conflicts) > CONFLICTS_LISTED:
            lines.append(f"- ... and {len(conflicts) - CONFLICTS_LISTED} more in `{REMOVED_FILE}`")
    for verdict in ("exact", "near"):
        for kind in ("within", "cross"):
            ex = [x for x in v if x.verdict == verdict and x.kind == kind][:EXAMPLES_PER_KIND]
            if not ex:
                continue
            lines += ["", f"## {verdict.capitalize()} duplicates, {kind} a benchmark" if kind == "within"
                      else f"## {verdict.capitalize()} duplicates across benchmarks", ""]
            for x in ex:
                assert x.duplicate_of is not None and x.duplicate_text is not None
                lines.append(f"- `{x.item.item_id}` ({x.item.bench}) duplicates `{x.duplicate_of.item_id}` "
                             f"({x.duplicate_of.bench}), similarity {x.similarity:.3f}")
                lines.append(f"  - removed: {_quote(x.text)}")
                lines.append(f"  - kept: {_quote(x.duplicate_text)}")
    return "\n".join(lines) + "\n"


def write_outputs(result: DedupResult, out: str | Path) -> list[Path]:
    """Write the four step-0 files into ``out``; the kept list last, since it is what later steps read."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    counts = bench_counts(result.verdicts)
    removed = "".join(json.dumps(removed_record(x)) + "\n" for x in result.verdicts if not x.kept)
    files = [
        (folder / REMOVED_FILE, removed.encode()),
        (folder / COUNTS_FILE, counts_csv(counts).encode()),
        (folder / SUMMARY_FILE, summary_markdown(result, counts).encode()),
        (folder / KEPT_FILE, kept_table_bytes(result.verdicts)),
    ]
    for path, data in files:
        write_atomic(path, functools.partial(_write, data))
    return [p for p, _ in files]
