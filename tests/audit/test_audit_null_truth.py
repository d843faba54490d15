"""The conditioned null against constructed worlds with a known truth, written as real step result
files through the screening's row builder and the store, and audited end to end by the CLI:
all golds at one letter, 5-item benchmarks, two options whose only possible golds remove the
item at step 4, pure-noise cells under Benjamini-Hochberg, true shortcuts called, and
--target-fdr against the true false-discovery proportion."""

from __future__ import annotations

import csv
import random
import subprocess
import sys
from pathlib import Path

from audit_synth import SimModel, make_items, run_step, write_items

from benchcheck.audit import read_forwards
from benchcheck.audit.null import nulls
from benchcheck.audit.rule import removes
from benchcheck.items import Item
from benchcheck.report.audit import read_audit

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def _audit(tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[tuple[str, int], dict[str, str]]]:
    p = subprocess.run([*BIN, "audit", "--results", str(tmp / "results"), "--items", str(tmp / "items"),
                        "--out", str(tmp / "audit"), "--rounds", "20", *extra], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = {(r["bench"], int(r["step"])): r for r in csv.DictReader((tmp / "audit" / "audit_null.csv").open())}
    return p, rows


def _chain(tmp: Path, items: list[Item], model: SimModel, content: dict[str, list[float]],
           content4: dict[str, list[float]] | None = None) -> None:
    """Step 1 on every item, step 4 on its survivors (the chain), both through the store."""
    for bench in sorted({it.bench for it in items}):
        chosen = [it for it in items if it.bench == bench]
        rows1 = run_step(tmp / "results", 1, chosen, model, content)
        alive = [it for it, r in zip(chosen, rows1, strict=True) if not r["removed"]]
        if alive:
            run_step(tmp / "results", 4, alive, model, content4 or content)
    write_items(tmp / "items" / "pool.jsonl", items)


def _false(tmp: Path, step: int, answerable: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in read_forwards(tmp / "results").get(step, []):
        out[f.bench] = out.get(f.bench, 0) + (f.removed and f.item_id not in answerable)
    return out


def test_all_golds_at_one_letter_counts_the_certain_removals(tmp_path: Path) -> None:
    """Every gold at A and a model that prefers the letter A: at step 4 (options in their order)
    every removal is chance and the null makes each of them whatever the gold; the estimate used
    to be 0 [0, 0]. At step 1 (options shuffled) the option-label null still separates the true
    shortcuts from chance."""
    rng = random.Random(3)
    items = [Item(it.item_id, it.bench, it.question, it.options, 0) for it in make_items("OneLetter", 300, 4, rng)]
    shortcut = {it.item_id for it in items if rng.random() < 0.2}
    content = {it.item_id: [rng.gauss(0, 1.2) + (4.5 if it.item_id in shortcut and j == 0 else 0.0)
                            for j in range(4)] for it in items}
    content4 = {it.item_id: [rng.gauss(0, 0.3) for _ in range(4)] for it in items}  # no shortcut at step 4
    _chain(tmp_path, items, SimModel("m", prior=[0.55, 0.15, 0.15, 0.15], noise=0.3, rng=random.Random(4)),
           content, content4)
    _, rows = _audit(tmp_path)
    s4 = rows[("OneLetter", 4)]
    removed4 = int(s4["removed"])
    assert removed4 > 50
    assert abs(float(s4["est_false_removals"]) - removed4) < 1.0  # (p_i = 1 - 1/n: every letter stays possible)
    assert float(s4["est_false_lo"]) <= removed4 <= float(s4["est_false_hi"])
    assert s4["excess_called"] == "False"
    s1 = rows[("OneLetter", 1)]
    false1 = _false(tmp_path, 1, shortcut)["OneLetter"]
    assert s1["null_kind"] == "option_label" and s1["excess_called"] == "True"
    assert float(s1["est_false_lo"]) <= false1 <= float(s1["est_false_hi"]), (false1, s1)
    # The gold-frequency null cannot tell at step 1: every removal there is certain under it.
    assert abs(float(s1["est_false_gold"]) - int(s1["removed"])) < 1.0


def test_five_item_benchmarks_cover_the_truth(tmp_path: Path) -> None:
    """Twenty benchmarks of 5 items (one of them alone with its 5 options): the interval covers
    the true chance removals in at least 90 % of the cells, and a lone item's chance removal
    probability is not its own decision."""
    rng = random.Random(5)
    items: list[Item] = []
    for b in range(20):
        items += [*make_items(f"Small{b}", 4, 4, rng), make_items(f"Small{b}", 1, 5, rng)[0]]
        items[-1] = Item(f"Small{b}_lone", f"Small{b}", "lone?", items[-1].options, items[-1].answer)
    shortcut = {it.item_id for it in items if rng.random() < 0.2}
    content = {it.item_id: [rng.gauss(0, 1.5) + (4.0 if it.item_id in shortcut and j == it.answer else 0.0)
                            for j in range(len(it.options))] for it in items}
    _chain(tmp_path, items, SimModel("m", noise=0.3, rng=random.Random(6)), content)
    _, rows = _audit(tmp_path)
    covered = total = 0
    for step in (1, 4):
        truth = _false(tmp_path, step, shortcut)
        for bench, t in truth.items():
            r = rows[(bench, step)]
            total += 1
            covered += float(r["est_false_lo"]) <= t <= float(r["est_false_hi"])
    assert total >= 30 and covered >= 0.9 * total, (covered, total)
    by_item = {(r["item_id"], r["step"]): r for r in csv.DictReader((tmp_path / "audit" / "audit_items.csv").open())}
    lone = [r for (iid, s), r in by_item.items() if iid.endswith("_lone") and s == "4"]
    assert lone and all(0.0 < float(r["null_p"]) < 1.0 for r in lone if r["removed"] == "True")


def test_two_options_whose_only_possible_gold_removes_them(tmp_path: Path) -> None:
    """Two options and confident opinions that repeat: an item kept at step 1 while it strongly
    prefers one option must have the other as its gold, and at step 4 a strong letter A then
    removes it for its only possible gold (p = 1 after conditioning). Such items used to be
    invisible to the estimate; now they count, and the interval covers the truth."""
    rng = random.Random(7)
    items = make_items("Two", 600, 2, rng)
    content = {it.item_id: [rng.gauss(0, 2.0) for _ in range(2)] for it in items}
    model = SimModel("m", prior=[0.8, 0.2], noise=0.2, rng=random.Random(8))
    _chain(tmp_path, items, model, content)
    _, rows = _audit(tmp_path)
    s4 = rows[("Two", 4)]
    truth = _false(tmp_path, 4, set())["Two"]
    assert int(s4["certain_removals"]) > 5
    assert float(s4["cond_null_rate"]) < float(s4["null_rate"]) - 0.1  # the unconditioned null overstates
    assert float(s4["est_false_lo"]) <= truth <= float(s4["est_false_hi"]), (truth, s4)
    assert s4["excess_called"] == "False"


def test_pure_noise_cells_are_not_called_and_shortcuts_are(tmp_path: Path) -> None:
    """40 pure-noise cells (20 benchmarks x steps 1 and 4, skewed golds, a letter prior): no excess
    is called at the default level and the headline says to treat the removals as noise; a
    benchmark with 25 % true shortcuts added is called and the headline follows the call."""
    rng = random.Random(9)
    items: list[Item] = []
    for b in range(20):
        items += [Item(it.item_id, it.bench, it.question, it.options, rng.choices(range(4), (5, 3, 1, 1))[0])
                  for it in make_items(f"Noise{b}", 60, 4, rng)]
    content = {it.item_id: [rng.gauss(0, 1.2) for _ in range(4)] for it in items}
    model = SimModel("m", prior=[0.4, 0.2, 0.2, 0.2], noise=0.3, rng=random.Random(10))
    _chain(tmp_path, items, model, content)
    p, rows = _audit(tmp_path)
    assert len(rows) == 40 and not any(r["excess_called"] == "True" for r in rows.values())
    assert all(0.0 <= float(r["p_value"]) <= 1.0 and float(r["p_adjusted"]) >= float(r["p_value"])
               for r in rows.values())
    assert "CELLS=40 EXCESS_CALLED=0" in p.stdout and "none of the 40 benchmark x step cells" in p.stdout
    sc = make_items("Shortcut", 200, 4, rng)
    short = {it.item_id for it in sc if rng.random() < 0.25}
    content |= {it.item_id: [rng.gauss(0, 1.2) + (4.0 if it.item_id in short and j == it.answer else 0.0)
                             for j in range(4)] for it in sc}
    _chain(tmp_path, items + sc, model, content)
    p, rows = _audit(tmp_path)
    assert rows[("Shortcut", 1)]["excess_called"] == "True"
    n_called = sum(r["excess_called"] == "True" for r in rows.values())
    assert n_called <= 2
    verb = "removes more than its" if n_called == 1 else "remove more than their"
    headline = f"{n_called} of the {len(rows)} benchmark x step cells {verb} null (Benjamini-Hochberg at FDR 0.05)"
    assert headline in p.stdout
    md = (tmp_path / "audit" / "audit.md").read_text()
    assert "| BH-adjusted |" in md and "## False-discovery curve" in md


def test_target_fdr_names_a_threshold_whose_removals_are_mostly_true(tmp_path: Path) -> None:
    """Shortcuts with large margins and chance removals with small ones: --target-fdr 0.1 names a
    margin threshold, says what it keeps, and the true false-discovery proportion among the
    removals it keeps is at most 0.1."""
    rng = random.Random(11)
    items = make_items("Fdr", 800, 4, rng)
    short = {it.item_id for it in items if rng.random() < 0.2}
    content = {it.item_id: [rng.gauss(0, 1.0) + (5.0 if it.item_id in short and j == it.answer else 0.0)
                            for j in range(4)] for it in items}
    _chain(tmp_path, items, SimModel("m", noise=0.3, rng=random.Random(12)), content)
    p, _ = _audit(tmp_path, "--target-fdr", "0.1", "--fdr-level", "0.01")
    line = next(x for x in p.stdout.splitlines() if x.startswith("--target-fdr 0.1 (all benchmarks and steps)"))
    assert "keeps" in line, line
    target = list(csv.DictReader((tmp_path / "audit" / "audit_fdr_target.csv").open()))
    pooled = next(r for r in target if r["bench"] == "*")
    t = float(pooled["threshold"])
    assert float(pooled["fdr_hi"]) <= 0.1
    kept = false = 0
    for _step, rows in read_forwards(tmp_path / "results").items():
        for f in rows:
            if f.removed and removes(f.perms, f.lps, f.answer, t):
                kept += 1
                false += f.item_id not in short
    assert kept == int(pooled["kept_removals"]) > 0
    assert false / kept <= 0.1, (false, kept)
    curve = list(csv.DictReader((tmp_path / "audit" / "audit_fdr.csv").open()))
    assert {"bench", "step", "threshold", "removed", "est_false", "est_false_hi", "fdr", "fdr_hi"} <= set(curve[0])
    # The report shows the curve, the target and the corrected calls.
    data = read_audit(tmp_path / "audit")
    assert any("false-discovery share" in c for c in data.charts)
    assert any(t.name == "audit_fdr_target.csv" for t in data.tables)
    null = next(t for t in data.tables if t.name == "audit_null.csv")
    assert {"p_value", "p_adjusted", "excess_called"} <= set(null.header)


def test_nulls_is_deterministic_and_conditions_only_on_selecting_steps(tmp_path: Path) -> None:
    """Step 4 run on every item (removed ones too, as the demo's tiny model is run) is not
    conditioned on step 1; run on the survivors it is."""
    rng = random.Random(13)
    items = make_items("Cond", 300, 4, rng)
    content = {it.item_id: [rng.gauss(0, 1.5) for _ in range(4)] for it in items}
    model = SimModel("m", noise=0.3, rng=random.Random(14))
    run_step(tmp_path / "all", 1, items, model, content)
    run_step(tmp_path / "all", 4, items, model, content)
    by_step = read_forwards(tmp_path / "all")
    a, b = nulls(by_step, rounds=10), nulls(by_step, rounds=10)
    assert [r.record() for r in a] == [r.record() for r in b]
    alone = nulls({4: by_step[4]}, rounds=10)[0]
    assert next(r for r in a if r.step == 4).item_p == alone.item_p
