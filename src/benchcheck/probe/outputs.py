"""The probe's files: per item (Parquet), per benchmark, the IBP curve, the label flags, and
``probe.md`` that reads them out. Each is rewritten whole through a temporary file and a rename."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchcheck.atomic import write_atomic, write_text_atomic
from benchcheck.audit.write import csv_text
from benchcheck.probe.flags import LabelFlag
from benchcheck.probe.run import SIGNIFICANCE, BenchProbe, ProbeResult, min_p_value
from benchcheck.protocol import LETTERS
from benchcheck.step0.probe_stamp import Pairs, write_stamp
from benchcheck.step0.scope import NOT_DEDUPLICATED, not_deduplicated_note

ITEMS_FILE = "probe_items.parquet"
BENCH_FILE = "probe_benchmarks.csv"
IBP_FILE = "probe_ibp.csv"
FLAGS_FILE = "label_flags.csv"
MD_FILE = "probe.md"
BENCH_FIELDS = ("bench", "items", "step0_removed", "step0", "videos", "folds", "accuracy", "chance", "p_value",
                "null_mean", "p_positions_kept", "permutations", "learnable", "blind_items", "blind_accuracy",
                "probe_on_blind_items", "blind_gain", "ibp_remaining", "ibp_at_chance", "skipped")
IBP_FIELDS = ("bench", "round", "items", "accuracy", "chance", "p_above_chance", "pruned_next")
FLAGS_FIELDS = ("rank", "item_id", "bench", "gold", "flagged_option", "agree", "sources", "for_gold", "min_margin",
                "evidence")


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


def bench_record(b: BenchProbe) -> dict[str, object]:
    return {"bench": b.bench, "items": b.items, "step0_removed": b.step0_removed, "step0": step0_cell(b),
            "videos": b.videos,
            "folds": b.folds, "accuracy": _r(b.accuracy), "chance": _r(b.chance),
            "p_value": _r(b.uniform.p_value) if b.uniform else None,
            "null_mean": _r(b.uniform.null_mean) if b.uniform else None,
            "p_positions_kept": _r(b.shuffle.p_value) if b.shuffle else None,
            "permutations": b.uniform.rounds if b.uniform else 0,
            "learnable": b.learnable if b.skipped is None and b.tested else None,
            "blind_items": b.blind_items, "blind_accuracy": _r(b.blind_accuracy),
            "probe_on_blind_items": _r(b.probe_on_blind), "blind_gain": _r(b.blind_gain),
            "ibp_remaining": b.ibp.remaining if b.ibp else None,
            "ibp_at_chance": b.ibp.at_chance if b.ibp else None, "skipped": b.skipped}


def step0_cell(b: BenchProbe) -> str | None:
    """What step 0 did to the benchmark: empty without ``--step0``; "not deduplicated" where its
    dedup run never read it (``step0_removed`` is then empty, never a zero it did not count)."""
    if b.not_deduplicated:
        return NOT_DEDUPLICATED
    return None if b.step0_removed is None else "deduplicated"


def not_deduplicated(res: ProbeResult) -> dict[str, int]:
    """Benchmark -> its items the probe read, for each benchmark step 0's dedup run never read."""
    return {b.bench: b.items for b in res.benches if b.not_deduplicated}


PROBED_WHOLE = "the probe read {it} whole, its copies included, as screen --keep screens {it}"


def ibp_records(res: ProbeResult) -> list[dict[str, object]]:
    return [{"bench": b.bench, "round": r.round, "items": r.items, "accuracy": round(r.accuracy, 4),
             "chance": round(r.chance, 4), "p_above_chance": round(r.p_above_chance, 6), "pruned_next": r.removed}
            for b in res.probed if b.ibp for r in b.ibp.rounds]


def item_records(res: ProbeResult) -> list[dict[str, object]]:
    return [{"item_id": i.item_id, "bench": i.bench, "video": i.video, "gold": LETTERS[i.gold], "fold": i.fold,
             "probe_pick": LETTERS[i.pick], "probe_p_gold": i.p_gold, "probe_margin": round(i.as_pick.margin, 4),
             "probe_probs": list(i.probs), "ibp_pruned_round": i.ibp_round} for i in res.items]


def untested_reading(b: BenchProbe) -> str:
    if b.uniform is None:
        return "not tested (no permutations)"
    return (f"not tested: {b.uniform.rounds} permutations cannot give p <= {SIGNIFICANCE} "
            f"(the smallest p is {min_p_value(b.uniform.rounds):.2g})")


def markdown(res: ProbeResult, flags: Sequence[LabelFlag] | None, flag_sources: Sequence[str]) -> str:
    lines = ["# Text-only probe", "",
             "A k-fold model that learns to pick the gold from the text alone (question and options, no video), "
             "scored out of fold, folds grouped by video. Accuracy above chance is evidence of a learnable shortcut, "
             "not proof (docs/probe.md).", "",
             f"Embedding model: {res.model}; embeddings encoded {res.embed.encoded}, reused {res.embed.reused}.",
             "",
             "| bench | items | videos | folds | probe accuracy | chance | p (uniform gold) | p (positions kept) | "
             "step-1 accuracy | blind gain | IBP keeps | reading |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b in res.benches:
        if b.skipped:
            lines.append(f"| {b.bench} | {b.items} | {b.videos} | | | | | | | | | skipped: {b.skipped} |")
            continue
        r = bench_record(b)

        def f(v: object, fmt: str = ".3f") -> str:
            return format(v, fmt) if isinstance(v, float | int) and not isinstance(v, bool) else ""

        reading = ("learnable from text" if b.learnable else "at chance for the probe" if b.tested
                   else untested_reading(b))
        ibp = "" if b.ibp is None else f"{b.ibp.remaining}/{b.items}" + ("" if b.ibp.at_chance else " (not at chance)")
        lines.append(f"| {b.bench} | {b.items} | {b.videos} | {b.folds} | {f(b.accuracy)} | {f(b.chance)} | "
                     f"{f(r['p_value'], '.3g')} | {f(r['p_positions_kept'], '.3g')} | {f(b.blind_accuracy)} | "
                     f"{f(b.blind_gain, '+.3f')} | {ibp} | {reading} |")
    at0 = [b for b in res.benches if b.step0_removed is not None]
    if at0:
        per = ", ".join(f"{b.bench} {b.step0_removed}" for b in at0 if b.step0_removed)
        lines += ["", f"Step 0: {sum(b.step0_removed or 0 for b in at0)} duplicates it removed are left out"
                  + (f" ({per})" if per else "") + "; items counts the items it kept."]
    if unread := not_deduplicated(res):
        lines += ["", not_deduplicated_note(unread, PROBED_WHOLE)]
    lines += ["", f"Learnable: p (uniform gold) <= {SIGNIFICANCE} (each item's gold redrawn uniformly among its "
              "options and the whole k-fold probe refitted). p (positions kept): golds permuted among the "
              "benchmark's items, so a position bias alone is not counted."]
    if flags is not None:
        lines += ["", "## Label-error flags", "",
                  f"Sources: {', '.join(flag_sources) or 'none'}. A list for a person to check, never a removal.", ""]
        if not flags:
            lines.append("No item is flagged.")
        else:
            lines += ["| rank | item | bench | gold | sources agree on | agree | for the gold | evidence (pick, margin "
                      "in nats) |", "|---|---|---|---|---|---|---|---|"]
            for n, fl in enumerate(flags, 1):
                lines.append(f"| {n} | {fl.item_id} | {fl.bench} | {LETTERS[fl.gold]} | {LETTERS[fl.option]} | "
                             f"{fl.agree}/{fl.sources} | {fl.against} | {fl.evidence_text()} |")
    return "\n".join(lines) + "\n"


def write_probe(res: ProbeResult, out: str | Path, flags: Sequence[LabelFlag] | None = None,
                flag_sources: Sequence[str] = (), step0: Pairs = (), step0_source: str | None = None) -> list[Path]:
    """Every file of the probe, ``probe_step0.json`` first marked in progress and last complete:
    the items it left out at step 0 (``step0``, as (bench, item id) pairs) and the ``--step0``
    given (``step0.probe_stamp``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    # An earlier run's record would vouch for these outputs while they are written, and no record
    # at all reads as a probe without --step0: a kill midway must leave one every reader rejects.
    write_stamp(d, step0, step0_source, complete=False)
    schema = pa.schema([("item_id", pa.string()), ("bench", pa.string()), ("video", pa.string()),
                        ("gold", pa.string()), ("fold", pa.int64()), ("probe_pick", pa.string()),
                        ("probe_p_gold", pa.float64()), ("probe_margin", pa.float64()),
                        ("probe_probs", pa.list_(pa.float64())), ("ibp_pruned_round", pa.int64())])
    table = pa.Table.from_pylist(item_records(res), schema=schema)
    write_atomic(d / ITEMS_FILE, lambda f: pq.write_table(table, f))
    paths = [d / ITEMS_FILE]
    if flags is None:
        # A flags file from an earlier run would be read by assemble and the report as this run's.
        (d / FLAGS_FILE).unlink(missing_ok=True)
    for name, rows, header in ((BENCH_FILE, [bench_record(b) for b in res.benches], BENCH_FIELDS),
                               (IBP_FILE, ibp_records(res), IBP_FIELDS)):
        write_text_atomic(d / name, csv_text(rows) or ",".join(header) + "\n")
        paths.append(d / name)
    if flags is not None:
        write_text_atomic(d / FLAGS_FILE, csv_text([f.record(n) for n, f in enumerate(flags, 1)]) or
                          ",".join(FLAGS_FIELDS) + "\n")
        paths.append(d / FLAGS_FILE)
    write_text_atomic(d / MD_FILE, markdown(res, flags, flag_sources))
    paths.append(d / MD_FILE)
    paths.append(write_stamp(d, step0, step0_source))
    return paths
