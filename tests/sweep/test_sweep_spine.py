"""The sweep on the spine: typed rows under the condition's config hash, the reducer's done/stale/
failed, the CSV written from the rows, folders of the layout before the rows, the run log."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections import Counter
from pathlib import Path

from sweep_helpers import RULES, mixed_items, write_rules

from benchcheck.data import runlog
from benchcheck.data.report import build_report, to_markdown
from benchcheck.items import load_items
from benchcheck.records import ErrorRow, GenRow
from benchcheck.store import read_records
from benchcheck.sweep.cli_run import SweepArgs, dry_run, plan, run
from benchcheck.sweep.conditions import SWEEP_MODEL
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import ALL_CONDITIONS, COLUMNS, SweepPaths, read_csv, read_csv_all
from benchcheck.sweep.rows import csv_of

FIXTURE = Path(__file__).parent / "data" / "main_31dab8a"  # made by make_main_31dab8a.py on main 31dab8a
FIXTURE_CONDS = "v_blind,v_1,v_32,v_32_s448,v_fps0.25_s224"
OTHER_REVISION = "1" * 40


def _args(tmp: Path, store: Path, conds: str, rules: list[dict[str, object]] | None = None,
          revision: str | None = None, **kw: object) -> SweepArgs:
    r = write_rules(tmp / "rules.json", rules or RULES)
    items = load_items(mixed_items(tmp)).items
    return SweepArgs(items, str(store), SweepPaths.under(tmp / "fp" / "results"), conds,
                     engine=SweepEngine("scripted", rules=str(r), revision=revision), progress=False,
                     decode_workers=0, **kw)  # type: ignore[arg-type]


def _quiet(_: str) -> None:
    pass


def _dry(a: SweepArgs) -> list[str]:
    lines: list[str] = []
    dry_run(a, lines.append)
    return lines


def _total(lines: list[str]) -> dict[str, int]:
    return {k: int(v) for k, v in (p.split("=") for p in lines[-1].removeprefix("TOTAL ").split())}


def _no_row_twice(path: Path) -> None:
    keys = Counter((r["bench"], r["item_id"], r["condition"], r.get("config_hash", "")) for r in read_csv_all(path))
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]


def test_rows_made_under_another_token_budget_are_stale_and_redone(tmp_path: Path, store: Path) -> None:
    conds = "v_blind,v_1,v_fps0.25_s224"
    small = _args(tmp_path, store, conds, token_budget=30000)
    run(small, _quiet)
    before = small.paths.csv.read_bytes()
    old = {(r["bench"], r["item_id"], r["condition"]): r["config_hash"] for r in read_csv(small.paths.csv)}

    default = _args(tmp_path, store, conds)
    cells, specs, _ = plan(default)
    kinds = Counter((c.condition, c.kind) for c in cells)
    # v_blind has no frames: the budget is not in its spec, so its rows stay done.
    assert kinds[("v_blind", "done")] == 9 and not any(c.kind == "done" for c in cells if c.condition != "v_blind")
    redo = [c for c in cells if c.stale]
    assert {c.condition for c in redo} == {"v_1", "v_fps0.25_s224"}
    assert all("frames.token_budget 30000 -> 58000" in c.stale for c in redo)
    lines = _dry(default)
    assert any(x.startswith("stale Alpha v_1: 4 to redo (") and "token_budget 30000 -> 58000" in x for x in lines)
    assert _total(lines)["stale"] == len(redo) and _total(lines)["done"] == 9

    summary = run(default, _quiet)
    assert summary.written["ok"] + summary.written["unparsed"] + summary.written["NA"] == len(redo)
    after = default.paths.csv.read_bytes()
    assert after.startswith(before)  # append-only: the stale rows stay, the new ones follow
    _no_row_twice(default.paths.csv)
    now = {(r["bench"], r["item_id"], r["condition"]): r["config_hash"] for r in read_csv(default.paths.csv)}
    assert set(now) == set(old)
    for (bench, iid, cond), h in now.items():
        assert h == specs[cond].config_hash
        assert (h == old[(bench, iid, cond)]) == (cond == "v_blind")
    # The typed rows carry the hash and the schema version; the dry run has nothing stale left.
    recs = list(read_records(default.paths.rows("v_1", "Alpha")))
    assert all(r.fields["schema_version"] == 1 for r in recs)
    hashes = Counter({old[("Alpha", "Alpha_0", "v_1")]: 4, specs["v_1"].config_hash: 4})
    assert Counter(r.config_hash for r in recs if isinstance(r, GenRow)) == hashes
    # the two items without a video: an error row under each spec (the new spec's cell failed anew)
    assert Counter(r.config_hash for r in recs if isinstance(r, ErrorRow)) == Counter({h: 2 for h in hashes})
    again = _total(_dry(default))
    assert again["todo"] == again["NA"] == again["stale"] == 0
    # pack's report counts each key once (its last row), not the stale row beside the redone one.
    stages = {s.name: s for s in build_report(default.paths.results, [], "h", "d", "t").stages}
    assert stages["v_fps0.25_s224"].na_rows == 1 and stages["v_1"].items_done + stages["v_1"].error_rows == 9


def test_rows_made_under_another_model_revision_are_stale_and_redone(tmp_path: Path, store: Path) -> None:
    default = _args(tmp_path, store, "v_blind,v_1")
    run(default, _quiet)
    other = _args(tmp_path, store, "v_blind,v_1", revision=OTHER_REVISION)
    lines = _dry(other)
    total = _total(lines)
    assert total["done"] == 0 and total["stale"] == total["todo"] == 9 + 7
    assert any(f"model.revision '{SWEEP_MODEL.revision}' -> '{OTHER_REVISION}'" in x for x in lines)
    summary = run(other, _quiet)
    assert summary.written["ok"] + summary.written["unparsed"] == 16
    _no_row_twice(other.paths.csv)
    assert _total(_dry(other))["todo"] == 0
    # Back to the pinned revision: its rows are there, so nothing is redone and no row is added
    # again; the CSV's readers take the rows of the spec the last run used.
    assert _total(_dry(default))["todo"] == 0
    before = default.paths.csv.read_bytes()
    assert {r["config_hash"] for r in read_csv(default.paths.csv) if r["condition"] == "v_1"} == {
        plan(other)[1]["v_1"].config_hash}
    run(default, _quiet)
    assert default.paths.csv.read_bytes() == before
    assert {r["config_hash"] for r in read_csv(default.paths.csv) if r["condition"] == "v_1"} == {
        plan(default)[1]["v_1"].config_hash}


def test_a_results_folder_made_by_main_31dab8a_is_read(tmp_path: Path, store: Path) -> None:
    fp = tmp_path / "fp"
    shutil.copytree(FIXTURE, fp)
    a = _args(tmp_path, store, FIXTURE_CONDS)
    csv_before = a.paths.csv.read_bytes()
    total = _total(_dry(a))
    assert total["todo"] == total["NA"] == total["reuse"] == total["stale"] == 0 and total["done"] == 37
    failed = sorted((c.item.item_id, c.condition) for c in plan(a)[0] if c.kind == "failure")
    run(a, _quiet)
    # nothing redone, nothing rewritten; the cells main left without a row get their error rows
    added = a.paths.csv.read_bytes()
    assert added.startswith(csv_before)
    new = list(csv.DictReader(io.StringIO(csv_before.decode().splitlines(keepends=True)[0]
                                          + added[len(csv_before):].decode())))
    assert failed and sorted((r["item_id"], r["condition"]) for r in new) == failed
    assert {r["status"] for r in new} == {"error"}
    csv_before = added

    small = _args(tmp_path, store, FIXTURE_CONDS, token_budget=30000)
    cells, _, _ = plan(small)
    visual = [c for c in cells if c.condition != "v_blind" and c.kind != "failure"]
    assert visual and all(c.stale and c.kind != "done" for c in visual)
    # What changed is told from the spec main's run left in p1_raw/<condition>/run_spec.json.
    assert all("frames.token_budget 58000 -> 30000" in c.stale for c in visual)
    assert all(c.kind == "done" for c in cells if c.condition == "v_blind")
    summary = run(small, _quiet)
    assert sum(summary.written.values()) == len(visual)
    assert a.paths.csv.read_bytes().startswith(csv_before)
    _no_row_twice(a.paths.csv)
    # Back to the default: main's rows (read from the CSV) count again; nothing is redone or added.
    cells, specs, _ = plan(a)
    assert all(c.kind in ("done", "failure") for c in cells)
    assert {r["config_hash"] for r in read_csv(a.paths.csv) if r["condition"] == "v_32"} != {
        specs["v_32"].config_hash}  # the CSV's readers follow the last run's spec: 30000 so far
    after_small = a.paths.csv.read_bytes()
    run(a, _quiet)
    assert a.paths.csv.read_bytes() == after_small
    assert {r["config_hash"] for r in read_csv(a.paths.csv) if r["condition"] == "v_32"} == {
        specs["v_32"].config_hash}


def test_origin_rows_of_a_foreign_csv_count_as_done_whatever_the_spec(tmp_path: Path, store: Path) -> None:
    a = _args(tmp_path, store, "v_blind,v_1", token_budget=30000)
    a.paths.results.mkdir(parents=True)
    origin = "bench,item_id,condition,status,pred,gold,correct,config_hash\n" + "".join(
        f"Alpha,Alpha_{i},{c},ok,B,A,0,0123456789abcdef\n" for i in range(4) for c in ("v_blind", "v_1"))
    a.paths.csv.write_text(origin)
    kinds = Counter((c.condition, c.kind) for c in plan(a)[0])
    assert kinds[("v_blind", "done")] == kinds[("v_1", "done")] == 4
    run(a, _quiet)
    rows = read_csv_all(a.paths.csv)
    # the other answers, and the error rows of the 2 items without a video in v_1 (the file has a status column)
    assert a.paths.csv.read_text().startswith(origin) and len(rows) == 8 + (9 - 4) + (7 - 4) + 2
    assert list(rows[-1]) == ["bench", "item_id", "condition", "status", "pred", "gold", "correct", "config_hash"]


def test_the_csv_is_written_from_the_rows_deterministically(tmp_path: Path, store: Path) -> None:
    conds = ["v_blind", "v_1", "v_32", "v_32_s448", "v_128_s224"]
    a = _args(tmp_path, store, ",".join(conds))
    run(a, _quiet)
    first = read_csv_all(a.paths.csv)
    assert next(csv.reader(io.StringIO(a.paths.csv.read_text()))) == list(COLUMNS)
    # Every CSV row is csv_row of a typed row (the current one of its key), and nothing else.
    typed = {}
    for p in sorted((a.paths.results / "sweep_rows").glob("*/*.jsonl")):
        if p.name == "run_specs.jsonl":
            continue
        for rec in read_records(p):
            assert isinstance(rec, GenRow | ErrorRow)
            key = (rec.bench, rec.item_id, rec.step)
            if isinstance(rec, GenRow) or key not in typed:  # an error row stands for a cell without an answer
                typed[key] = {k: str(v) for k, v in csv_of(rec).items()}
    assert {(r["bench"], r["item_id"], r["condition"]): r for r in first} == typed
    # Rebuilt from the rows alone (the CSV lost): the same rows, in plan order, byte-identical twice.
    rebuilt = []
    for _ in range(2):
        a.paths.csv.unlink()
        run(a, _quiet)
        rebuilt.append(a.paths.csv.read_bytes())
    assert rebuilt[0] == rebuilt[1]
    assert sorted(map(json.dumps, read_csv_all(a.paths.csv))) == sorted(map(json.dumps, first))
    order = [(r["bench"], r["condition"]) for r in read_csv_all(a.paths.csv)]
    assert order == sorted(order, key=lambda k: (k[0], conds.index(k[1])))
    # A run with nothing to do still catches the CSV up with the rows (a kill between the two).
    blind = _args(tmp_path, store, "v_blind")
    blind.paths.csv.unlink()
    lines: list[str] = []
    run(blind, lines.append)
    assert lines[-1].startswith("nothing to do") and "9 rows caught up" in lines[-1]


def test_engine_errors_are_error_rows_and_the_item_is_given_up_after_three(tmp_path: Path, store: Path) -> None:
    rules = [{"match": "unsure", "error": {"status": 500, "message": "broken"}}, *RULES]
    a = _args(tmp_path, store, "v_blind", rules=rules)
    summary = run(a, _quiet)  # asked again within the run, with backoff, until given up (unit_loop.Policy)
    assert summary.failures == 3 and summary.written["ok"] == 8
    assert run(a, _quiet).failures == 0  # given up: not asked again
    errors = [r for r in read_records(a.paths.rows("v_blind", "Alpha")) if isinstance(r, ErrorRow)]
    assert len(errors) == 3 and errors[0].error_status == 500 and not errors[0].retry_free
    total = _total(_dry(a))
    assert total["gave_up"] == 1 and total["todo"] == 0
    # Its CSV row is one error row (not one per attempt): every reader counts it as the cell's error.
    rows = [r for r in read_csv_all(a.paths.csv) if r["item_id"] == "Alpha_3"]
    assert [r["status"] for r in rows] == ["error"] and json.loads(rows[0]["meta"])["error_kind"] == "http 500"
    assert [r["status"] for r in read_csv(a.paths.csv) if r["item_id"] == "Alpha_3"] == ["error"]


def test_sweep_run_writes_the_run_log_and_pack_reports_wall_time(tmp_path: Path, store: Path) -> None:
    assert runlog.ALL_CONDITIONS == ALL_CONDITIONS
    a = _args(tmp_path, store, "v_blind,v_1,v_fps0.25_s224")
    run(a, _quiet)
    log = [json.loads(x) for x in a.paths.run_log.read_text().splitlines()]
    whole = [r for r in log if r["condition"] == ALL_CONDITIONS]
    assert len(whole) == 1 and whole[0]["ok"] == 9 + 7 + 6 and whole[0]["gpus"] == 0
    assert {r["condition"] for r in log} == {"v_blind", "v_1", "v_fps0.25_s224", ALL_CONDITIONS}
    rep = build_report(a.paths.results, [a.paths.logs, a.paths.data_logs.parent], "h", "d", "t.tar.gz")
    stages = {s.name: s for s in rep.stages}
    total = stages["all conditions"]
    # rows: v_blind 9 answers; v_1 7 answers and 2 error rows (no video); fps 6 answers, 1 NA, 2 error rows
    assert total.wall_s is not None and total.wall_s > 0 and total.cpu and total.rows_added == 9 + 9 + 9
    assert stages["v_1"].wall_s is not None and stages["v_1"].items_done + stages["v_1"].error_rows == 9
    row = next(x for x in to_markdown(rep).splitlines() if x.startswith("| all conditions |"))
    assert "unknown" not in row and "| CPU |" in row
    # The in-process reference engine runs on the CPU as well: its runs were counted as one GPU each.
    ref = SweepArgs(a.items, a.store, SweepPaths.under(tmp_path / "ref"), "v_blind", engine=SweepEngine("reference"),
                    progress=False, decode_workers=0)
    run(ref, _quiet)
    assert {json.loads(x)["gpus"] for x in ref.paths.run_log.read_text().splitlines()} == {0}
    rep = build_report(ref.paths.results, [], "h", "d", "t.tar.gz")
    assert next(s for s in rep.stages if s.name == "all conditions").cpu
    # Served engines: no GPU count recorded, one GPU per endpoint assumed (launch's layout).
    t = runlog.summarize([{"started": 0, "ended": 10, "ok": 80, "endpoints": ["http://a/v1", "http://b/v1"]}])
    assert t.gpus_assumed and t.items_per_s_per_gpu == 4.0


def test_rows_of_the_hf_engine_carry_its_config_hash(tmp_path: Path, store: Path, tiny_model: Path) -> None:
    """Two runs that differ only in a fast path are told apart: an hf engine's rows keep the hash
    of its HFConfig (the scripted engine has none, and its rows carry none)."""
    from benchcheck.engines.hf.config import HFConfig

    items = load_items(mixed_items(tmp_path)).items
    res = tmp_path / "fp" / "results"
    args = SweepArgs(items, str(store), SweepPaths.under(res), "v_blind", limit=1,
                     engine=SweepEngine("hf", model=str(tiny_model), device="cpu"), progress=False, decode_workers=0)
    run(args, _quiet)
    rows = [r for p in sorted((res / "sweep_rows" / "v_blind").glob("*.jsonl")) for r in read_records(p)]
    assert rows and all(isinstance(r, GenRow) for r in rows)
    assert {r.engine_config_hash for r in rows} == {HFConfig().hash}
    log = [json.loads(line) for line in (res / "run_log.jsonl").read_text().splitlines()]
    assert log and {r.get("engine_config_hash") for r in log} == {HFConfig().hash}
    scripted = tmp_path / "scripted"
    scripted.mkdir()
    run(_args(scripted, store, "v_blind", limit=1), _quiet)
    rows = [r for p in sorted((scripted / "fp" / "results" / "sweep_rows" / "v_blind").glob("*.jsonl"))
            for r in read_records(p)]
    assert rows and {r.engine_config_hash for r in rows} == {None}
