"""Two sweeps on the same work: the NA and reused rows (written outside any group's engine work)
are written once, whichever run gets there first."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sweep_helpers import item, write_items, write_rules

from benchcheck.items import load_items
from benchcheck.lease import try_lease
from benchcheck.store import read_rows
from benchcheck.sweep.cli_run import SweepArgs, planned, run_local
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import SweepPaths, read_csv_all


def _args(tmp_path: Path, store: Path) -> SweepArgs:
    items = write_items(tmp_path / "items", [item("Alpha", 1, "short20"), item("Alpha", 2, "s480")])
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    return SweepArgs(load_items(items).items, str(store), SweepPaths.under(tmp_path / "results"),
                     "v_32,v_32_s448,v_128_s224", engine=SweepEngine("scripted", rules=str(rules)), progress=False,
                     decode_workers=0)


def _lines(paths: SweepPaths, condition: str) -> tuple[Counter[str], Counter[str]]:
    """Typed rows and raw lines per item of a condition's Alpha group."""
    typed = Counter(str(r["item_id"]) for r in read_rows(paths.rows(condition, "Alpha")))
    raw = Counter(str(r["item_id"]) for r in read_rows(paths.raw(condition, "Alpha")))
    return typed, raw


def test_two_runs_planned_together_write_na_and_reused_rows_once(tmp_path: Path, store: Path) -> None:
    """Both runs read the folder before either wrote (two processes started at once): the second
    finds the NA and reused rows written under each group's lease and adds none."""
    a = _args(tmp_path, store)
    echo = lambda s: None  # noqa: E731
    first, second = planned(a, echo), planned(a, echo)
    assert first is not None and second is not None
    one = run_local(a, *first, echo)
    two = run_local(a, *second, echo)
    assert one.written["NA"] == 1 and one.written["reuse"] == 2
    assert two.written["NA"] == 0 and two.written["reuse"] == 0
    for condition, items in (("v_128_s224", {"Alpha_1"}), ("v_32_s448", {"Alpha_1", "Alpha_2"})):
        typed, raw = _lines(a.paths, condition)
        assert set(typed) >= items and all(typed[i] == 1 for i in items), typed
        assert all(raw[i] == 1 for i in items), raw
    keys = Counter((r["item_id"], r["condition"], r["config_hash"]) for r in read_csv_all(a.paths.csv))
    assert max(keys.values()) == 1


def test_a_held_group_is_left_to_its_holder(tmp_path: Path, store: Path) -> None:
    """The NA rows of a group another live process holds are not written by this run (its holder,
    or the next run, writes them) and are counted as held; the next run writes them once."""
    a = _args(tmp_path, store)
    echo = lambda s: None  # noqa: E731
    lease = try_lease(a.paths.raw("v_128_s224", "Alpha"))  # another holder of the NA group's lease
    assert lease is not None
    with lease:
        p = planned(a, echo)
        assert p is not None
        held = run_local(a, *p, echo)
    assert held.written["NA"] == 0 and held.held >= 1
    assert not _lines(a.paths, "v_128_s224")[0]["Alpha_1"]
    p = planned(a, echo)
    assert p is not None
    assert run_local(a, *p, echo).written["NA"] == 1
    assert _lines(a.paths, "v_128_s224")[0]["Alpha_1"] == 1
