"""``probe --step0``: the duplicates step 0 removed are neither probed nor flagged and are counted
apart per benchmark, as ``screen --keep`` leaves them out and ``report --step0`` counts them removed
at step 0; a ``--step0`` that cannot be read is one error line."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from probe_rows import run_step, write_items

from benchcheck.items import Item
from benchcheck.probe.synth import pattern_items

BIN = [str(Path(sys.executable).with_name("benchcheck"))]
WRONG = "Null_39"  # an item step 0 keeps whose gold the steps contradict: flagged with or without --step0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BIN, *args], capture_output=True, text=True, timeout=300)


def _copies(items: list[Item], n: int, wrong: int) -> list[Item]:
    """Exact copies (same text, same video) of the first ``n`` items; the first ``wrong`` of them
    carry another gold (step 0's gold conflicts)."""
    return [replace(it, item_id=f"{it.item_id}_copy", answer=(it.answer + 1) % len(it.options) if i < wrong
                    else it.answer) for i, it in enumerate(items[:n])]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, set[str], set[str]]:
    """Two benchmarks with planted copies, deduplicated by ``benchcheck dedup`` and screened without
    ``--keep`` (so the copies have rows too): steps 3, 5, 6 see each item's original gold, except
    on ``WRONG``, whose gold they all contradict. Returns the items folder, the results, the step-0
    folder, every id, and the gold-conflict copies."""
    root = tmp_path_factory.mktemp("probe_step0")
    null = pattern_items("none", 40, seed=0, bench="Null")
    small = pattern_items("none", 15, seed=0, bench="Small")  # 21 with its copies: probed only with them
    benches = {"Null": null + _copies(null, 8, 3), "Small": small + _copies(small, 6, 0)}
    items = root / "items"
    res = root / "results"
    for bench, its in benches.items():
        write_items(items / f"{bench}.jsonl", its)
        originals = {it.item_id: (it.answer + (it.item_id == WRONG)) % 4 for it in its
                     if not it.item_id.endswith("_copy")}
        seen = {it.item_id: [3.0 if j == originals[it.item_id.removesuffix("_copy")] else 0.0 for j in range(4)]
                for it in its}
        for s in (1, 3, 5, 6):
            run_step(res, s, its, seen if s != 1 else {k: [0.0] * 4 for k in seen}, seed=s)
    step0 = root / "step0"
    r = _cli("dedup", "--items", str(items / "Null.jsonl"), "--items", str(items / "Small.jsonl"), "--out", str(step0),
             "--model", "minilm", "--device", "cpu", "--quiet")
    assert r.returncode == 0, r.stderr
    every = {it.item_id for its in benches.values() for it in its}
    return items, res, step0, every, {it.item_id for it in _copies(null, 8, 3)[:3]}


def _probe(world: tuple[Path, Path, Path, set[str], set[str]], out: Path, *extra: str
           ) -> tuple[subprocess.CompletedProcess[str], set[str], dict[str, dict[str, str]], set[str]]:
    """The run, the probed ids, the per-benchmark rows and the flagged ids."""
    r = _cli("probe", "--items", str(world[0]), "--results", str(world[1]), "--out", str(out), "--model", "none",
             "--permutations", "0", "--no-ibp", *extra)
    assert r.returncode == 0, r.stderr
    probed = {str(x["item_id"]) for x in pq.read_table(out / "probe_items.parquet").to_pylist()}
    rows = {x["bench"]: x for x in csv.DictReader((out / "probe_benchmarks.csv").open())}
    flags = {x["item_id"] for x in csv.DictReader((out / "label_flags.csv").open())}
    return r, probed, rows, flags


def test_step0_duplicates_are_neither_probed_nor_flagged(world: tuple[Path, Path, Path, set[str], set[str]],
                                                         tmp_path: Path) -> None:
    _, _, step0, every, conflicts = world
    removed = {json.loads(x)["item_id"] for x in (step0 / "step0_removed.jsonl").read_text().splitlines()}
    assert {f"Null_{i}_copy" for i in range(8)} | {f"Small_{i}_copy" for i in range(6)} <= removed
    per_bench = Counter(i.split("_")[0] for i in removed)

    r, probed, rows, flags = _probe(world, tmp_path / "plain")
    assert probed == every and "STEP0_REMOVED" not in r.stdout
    assert rows["Small"]["skipped"] == "" and rows["Null"]["step0_removed"] == ""
    assert conflicts | {WRONG} <= flags  # the copies' golds are not what steps 3, 5, 6 saw

    r, probed, rows, flags = _probe(world, tmp_path / "step0", "--step0", str(step0))
    assert probed == {i for i in every - removed if i.startswith("Null_")}  # Small is skipped now
    assert WRONG in flags and flags.isdisjoint(removed)  # a kept item's flag stays, the copies' go
    assert {b: int(rows[b]["step0_removed"]) for b in rows} == {"Null": per_bench["Null"], "Small": per_bench["Small"]}
    assert int(rows["Null"]["items"]) == 40 and rows["Small"]["items"] == "15"
    assert rows["Small"]["skipped"].startswith("15 items, fewer than --min-items 20")
    assert f"STEP0_REMOVED={len(removed)} " in r.stdout and "BENCHMARKS=1 " in r.stdout
    assert f"Small: skipped (15 items, fewer than --min-items 20) ({per_bench['Small']} removed at step 0 left out)" \
        in r.stdout
    assert f"over 40 items ({per_bench['Null']} removed at step 0 left out)" in r.stdout
    assert f"Step 0: {len(removed)} duplicates it removed are left out" in (tmp_path / "step0" / "probe.md").read_text()

    # the kept list given to screen --keep names the same population
    _, kept_probed, kept_rows, _ = _probe(world, tmp_path / "keep", "--step0", str(step0 / "step0_kept.parquet"))
    assert kept_probed == probed and kept_rows["Null"]["step0_removed"] == rows["Null"]["step0_removed"]


def test_step0_that_cannot_be_read_is_one_line(world: tuple[Path, Path, Path, set[str], set[str]],
                                               tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    for step0 in (bad, tmp_path):  # a damaged kept list; a folder that is no dedup output
        r = _cli("probe", "--items", str(world[0]), "--out", str(tmp_path / "o"), "--model", "none",
                 "--step0", str(step0))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith(f"error: --step0 {step0}: cannot read the step-0 outcome")
        assert not (tmp_path / "o").exists()


def test_a_kept_list_of_some_benchmarks_leaves_the_others_whole(world: tuple[Path, Path, Path, set[str], set[str]],
                                                                tmp_path: Path) -> None:
    """dedup over Null alone: its kept list covers Null only, so Small, never deduplicated, is probed
    with its copies (as screen --keep screens it whole)."""
    step0 = tmp_path / "step0_null"
    r = _cli("dedup", "--items", str(world[0] / "Null.jsonl"), "--out", str(step0), "--model", "minilm",
             "--device", "cpu", "--quiet")
    assert r.returncode == 0, r.stderr
    r, probed, rows, _ = _probe(world, tmp_path / "p", "--step0", str(step0 / "step0_kept.parquet"))
    assert rows["Small"]["items"] == "21" and rows["Small"]["skipped"] == ""
    assert int(rows["Null"]["step0_removed"]) == 8 and {i for i in probed if i.startswith("Small_")} == \
        {i for i in world[3] if i.startswith("Small_")}
    # never "looked at, 0 removed": no count, and said so where the run is read (as report --step0 says it)
    assert (rows["Small"]["step0_removed"], rows["Small"]["step0"]) == ("", "not deduplicated")
    assert rows["Null"]["step0"] == "deduplicated"
    assert "over 21 items (not deduplicated), " in r.stdout, r.stdout
    note = ("Not deduplicated: Small (21 items). The dedup run behind --step0 never read it, so step 0 decided "
            "nothing of it and the probe read it whole, its copies included, as screen --keep screens it.")
    assert f"note: n{note[1:]}" in r.stderr.splitlines(), r.stderr
    assert f"\n{note}\n" in (tmp_path / "p" / "probe.md").read_text()

    # audit --step0 (and its --probe) and export --step0 say it in the report's words
    res = tmp_path / "results"
    shutil.copytree(world[1], res)
    a = _cli("audit", "--results", str(res), "--items", str(world[0]), "--out", str(tmp_path / "audit"),
             "--rounds", "10", "--step0", str(step0), "--probe")
    assert a.returncode == 0, a.stderr
    audited = ("Not deduplicated: Small (21 items). The dedup run behind --step0 never read it, so step 0 decided "
               "nothing of it and the chain screened it whole, as screen --keep does.")
    assert f"note: n{audited[1:]}" in a.stderr.splitlines() and f"note: n{note[1:]}" in a.stderr.splitlines(), \
        a.stderr
    assert f"\n{audited}\n" in (tmp_path / "audit" / "audit.md").read_text()
    assert {x["bench"]: x["step0"] for x in csv.DictReader((res / "probe" / "probe_benchmarks.csv").open())} == \
        {"Null": "deduplicated", "Small": "not deduplicated"}
    e = _cli("export", "--results", str(world[1]), "--items", str(world[0]), "--format", "inspect", "--out",
             str(tmp_path / "export"), "--chain", "1,3,5,6", "--step0", str(step0))
    assert e.returncode == 0, e.stderr
    assert f"note: n{audited[1:]}" in e.stderr.splitlines(), e.stderr


def test_audit_step0_leaves_the_duplicates_out_of_the_audit_and_its_probe(
        world: tuple[Path, Path, Path, set[str], set[str]], tmp_path: Path) -> None:
    """The copies were screened anyway (no --keep): audit --step0 counts none of their rows in a null,
    an item table or the probe it runs (--probe), as screen --keep would never have screened them."""
    import shutil

    items, results, step0, every, _ = world
    removed = {json.loads(x)["item_id"] for x in (step0 / "step0_removed.jsonl").read_text().splitlines()}
    res = tmp_path / "results"
    shutil.copytree(results, res)  # --probe writes RESULTS/probe
    r = _cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "audit"), "--rounds", "10",
             "--step0", str(step0), "--probe")
    assert r.returncode == 0, r.stderr
    audited = {x["item_id"] for x in csv.DictReader((tmp_path / "audit" / "audit_items.csv").open())}
    assert audited == every - removed
    nulls = list(csv.DictReader((tmp_path / "audit" / "audit_null.csv").open()))
    assert {(x["bench"], int(x["items"])) for x in nulls if x["step"] == "1"} == {("Null", 40), ("Small", 15)}
    assert f"STEP0_REMOVED={len(removed)} " in r.stdout
    assert f"Step 0: {len(removed)} duplicates it removed are left out" in (tmp_path / "audit" / "audit.md").read_text()
    assert f"{len(removed)} removed at step 0 left out" in r.stdout
    probed = {str(x["item_id"]) for x in pq.read_table(res / "probe" / "probe_items.parquet").to_pylist()}
    assert probed == {i for i in every - removed if i.startswith("Null_")}  # Small: 15 items, skipped

    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    r = _cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "o"), "--step0", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: --step0 {bad}: cannot read the step-0 outcome")
    assert not (tmp_path / "o").exists()


def test_audit_step0_counts_only_the_items_it_left_out(
        world: tuple[Path, Path, Path, set[str], set[str]], tmp_path: Path) -> None:
    """STEP0_REMOVED and audit.md count the multiple-choice items the audit left out: an open-format
    item (more than 26 options, never audited) that the kept list leaves out is not among them."""
    import shutil

    items, results, step0, every, _ = world
    removed = {json.loads(x)["item_id"] for x in (step0 / "step0_removed.jsonl").read_text().splitlines()}
    own = tmp_path / "items"
    shutil.copytree(items, own)
    with (own / "Null.jsonl").open("a") as f:
        f.write(json.dumps({"item_id": "Null_open", "bench": "Null", "question": "Which frame?",
                            "options": [f"frame {i}" for i in range(30)], "answer": 3, "video_id": "v0"}) + "\n")
    kept = tmp_path / "kept.txt"  # plain ids: covers both benchmarks, leaves the open item out
    kept.write_text("".join(f"{i}\n" for i in sorted(every - removed)))
    r = _cli("audit", "--results", str(results), "--items", str(own), "--out", str(tmp_path / "audit"),
             "--rounds", "10", "--step0", str(kept))
    assert r.returncode == 0, r.stderr
    assert f"STEP0_REMOVED={len(removed)} " in r.stdout
    assert f"Step 0: {len(removed)} duplicates it removed are left out" in (tmp_path / "audit" / "audit.md").read_text()


def test_audit_md_shows_a_probe_only_of_its_own_step_0(world: tuple[Path, Path, Path, set[str], set[str]],
                                                       tmp_path: Path) -> None:
    """RESULTS/probe outlives the probe's run: audit.md shows it only where it left out at step 0
    what the audit leaves out; else one note says it is another step 0's and how to rerun it."""
    import shutil

    items, results, step0, _, _ = world
    removed = len((step0 / "step0_removed.jsonl").read_text().splitlines())
    res = tmp_path / "results"
    shutil.copytree(results, res)
    heading = "## Text-only probe and label-error flags"

    def audit(*extra: str) -> tuple[str, str]:
        r = _cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "audit"),
                 "--rounds", "10", *extra)
        assert r.returncode == 0, r.stderr
        return (tmp_path / "audit" / "audit.md").read_text(), r.stderr

    _probe(world, res / "probe")  # without --step0: over the copies too
    md, err = audit("--step0", str(step0))
    stale = (f"The probe in {res / 'probe'} is not included: it ran without --step0, where this run leaves out "
             f"{removed} items. Add --probe to this audit to rerun it with the audit's step 0, or give the audit "
             "the --step0 the probe ran with.")
    assert md.endswith(f"{heading}\n\n{stale}\n"), md[md.index(heading):]
    assert "| bench | items |" not in md.split(heading)[1]
    assert f"note: {stale[0].lower()}{stale[1:]}" in err.splitlines(), err
    md, err = audit()  # the same probe beside an audit without step 0: its own
    assert f"From `{res / 'probe'}`" in md and "note: the probe" not in err

    _probe(world, res / "probe", "--step0", str(step0))
    md, err = audit("--step0", str(step0 / "step0_kept.parquet"))  # the same outcome, read from its kept list
    assert f"From `{res / 'probe'}`" in md and f"Step 0: {removed} duplicates it removed are left out" in \
        md.split(heading)[1] and "note: the probe" not in err, err
    md, err = audit()
    assert (f"it left out {removed} items removed at step 0 (--step0 {step0}), where this run leaves out none"
            in md.split(heading)[1]) and "note: the probe" in err


def test_report_and_assemble_show_a_probe_only_of_their_own_step_0(
        world: tuple[Path, Path, Path, set[str], set[str]], tmp_path: Path) -> None:
    """The report's audit page and item views, and assemble's pool, read RESULTS/probe by audit.md's
    rule: only a probe that left out at step 0 what they leave out (report --step0, assemble --keep);
    else one note in its place, and no item carries that probe's numbers."""
    items, results, step0, _, _ = world
    removed = len((step0 / "step0_removed.jsonl").read_text().splitlines())
    res = tmp_path / "results"
    shutil.copytree(results, res)
    kept = step0 / "step0_kept.parquet"

    def report(*extra: str) -> tuple[str, str, str]:
        out = tmp_path / "report"
        r = _cli("report", "--results", str(res), "--items", str(items), "--out", str(out), "--chain", "1,3,5,6",
                 "--no-progress", "--no-plots", *extra)
        assert r.returncode == 0, r.stderr
        chunks = "".join(p.read_text() for p in (out / "data").rglob("d*.js"))
        return (out / "audit.html").read_text(), chunks, r.stderr

    def pool(*extra: str) -> tuple[list[object], str]:
        r = _cli("assemble", "--items", str(items), "--results", str(res), "--chain", "1,3,5,6", *extra)
        assert r.returncode == 0, r.stderr
        return [x["probe_p_gold"] for x in pq.read_table(res / "pool_items.parquet").to_pylist()], r.stderr

    _probe(world, res / "probe")  # without --step0: over the copies too
    stale = f"The probe in {res / 'probe'} is not included: it ran without --step0, where this run leaves out " \
            f"{removed} items."
    html, chunks, err = report("--step0", str(step0))
    assert f'<p class="note" id="stale-probe">{stale} Rerun benchcheck probe with the report&#39;s --step0, or ' \
           "give the report the --step0 the probe ran with.</p>" in html, html[html.index('id="probe"'):][:800]
    assert "probe_benchmarks" not in html and '"probe":{' not in chunks
    assert f"note: t{stale[1:]}" in err
    html, chunks, err = report()  # the same probe beside a report without step 0: its own
    assert "probe_benchmarks" in html and '"probe":{' in chunks and "stale-probe" not in html and "note:" not in err
    gold, err = pool("--keep", str(kept))
    assert all(g is None for g in gold) and f"note: t{stale[1:]}" in err, err
    gold, err = pool()
    assert all(g is not None for g in gold) and "note:" not in err

    _probe(world, res / "probe", "--step0", str(step0))
    html, chunks, err = report("--step0", str(kept))  # the same outcome, read from its kept list
    assert "probe_benchmarks" in html and '"probe":{' in chunks and "note:" not in err, err
    gold, err = pool("--keep", str(kept))
    assert any(g is not None for g in gold) and "note:" not in err, err
    html, chunks, err = report()
    assert f"it left out {removed} items removed at step 0 (--step0 {step0}), where this run leaves out none" \
        in html and '"probe":{' not in chunks
    gold, err = pool()
    assert all(g is None for g in gold) and "where this run leaves out none. Rerun benchcheck probe" in err, err
    # without --items, the items --step0 left out cannot be named: no probe is shown as its own
    r = _cli("report", "--results", str(res), "--out", str(tmp_path / "bare"), "--chain", "1,3,5,6", "--no-progress",
             "--no-plots", "--step0", str(step0))
    assert r.returncode == 0, r.stderr
    assert "without --items the report cannot tell which items --step0 left out" in r.stderr, r.stderr
    assert "stale-probe" in (tmp_path / "bare" / "audit.html").read_text()
