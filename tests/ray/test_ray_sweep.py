"""``sweep run --executor ray`` writes the local runner's CSV rows on the ground-truth demo (reference
engine, scripted engine, tiny model), keeps them when an engine actor is killed mid-run, and a
killed driver's run is completed by the same command run again: one row per (item, condition)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ray_helpers import engine_actor_pids, kill, raw_keys, run_sweep, sweep_rows, write_sweep_rules

from benchcheck.engines.rules.reference import DEFAULT_NAME
from benchcheck.executors.ray_cluster import check_reachable
from benchcheck.sweep.demo import DEMO_CONDS
from benchcheck.sweep.results import CSV_NAME, SweepPaths, read_csv

FAULT_CONDS = "v_blind,v_1,v_8_s224"
FAULT_LIMIT = 8  # items per benchmark: 4 x 8 x 3 = 96 cells, one unit each


@pytest.fixture(scope="module")
def clean(demo: tuple[list[Path], Path], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str],
                                                                                             dict[str, str]]:
    """The local runner's rows of the fault tests' work, for comparison."""
    items, store = demo
    root = tmp_path_factory.mktemp("clean")
    run_sweep(items, store, root / "results", "local", FAULT_CONDS, FAULT_LIMIT,
              rules=write_sweep_rules(root / "r.json"))
    return sweep_rows(root / "results")


def test_demo_sweep_reference_engine_equals_local(ray_local: str, demo: tuple[list[Path], Path],
                                                  tmp_path: Path) -> None:
    check_reachable(ray_local)  # a live head's GCS passes the fail-fast check
    items, store = demo
    run_sweep(items, store, tmp_path / "local", "local", DEMO_CONDS, 3, engine="reference", model=DEFAULT_NAME)
    lines = run_sweep(items, store, tmp_path / "ray", "ray", DEMO_CONDS, 3, engine="reference", model=DEFAULT_NAME)
    a, b = sweep_rows(tmp_path / "local"), sweep_rows(tmp_path / "ray")
    # every item the limit picks (each demo benchmark's first ones) has a row in every condition
    assert a and len(a) == len({k[:2] for k in a}) * len(DEMO_CONDS.split(",")) and a == b
    assert any("engine actors" in x and "object store peak" in x for x in lines)
    assert any(r["meta"].find("reused_from") > 0 for r in b.values())  # reused rows written after the units
    assert raw_keys(tmp_path / "ray") == raw_keys(tmp_path / "local")
    assert {p.name for p in (tmp_path / "ray" / "p1_raw").iterdir()} == set(DEMO_CONDS.split(","))
    for cond in DEMO_CONDS.split(","):
        assert (tmp_path / "ray" / "p1_raw" / cond / "run_spec.json").read_bytes() == (
            tmp_path / "local" / "p1_raw" / cond / "run_spec.json").read_bytes()
    timing = (tmp_path / "ray").parent / "data" / "logs" / "p1_timing.jsonl"
    assert timing.is_file()
    # Rerun: nothing left, nothing added.
    before = (tmp_path / "ray" / CSV_NAME).read_bytes()
    again = run_sweep(items, store, tmp_path / "ray", "ray", DEMO_CONDS, 3, engine="reference", model=DEFAULT_NAME)
    assert (tmp_path / "ray" / CSV_NAME).read_bytes() == before and any("nothing to do" in x for x in again)


def test_tiny_model_sweep_equals_local(ray_local: str, demo: tuple[list[Path], Path], tmp_path: Path,
                                       tiny_model: Path) -> None:
    items, store = demo
    for ex in ("local", "ray"):
        run_sweep(items, store, tmp_path / ex, ex, "v_1", 1, engine="hf", model=str(tiny_model))
    a, b = sweep_rows(tmp_path / "local"), sweep_rows(tmp_path / "ray")
    assert a and len(a) == len({k[:2] for k in a}) and a.keys() == b.keys()
    for k in a:  # greedy text of the same requests, one unit per call on both: the same parse
        assert {f: a[k][f] for f in ("status", "pred", "parse", "n_frames", "prompt_tokens")} == (
            {f: b[k][f] for f in ("status", "pred", "parse", "n_frames", "prompt_tokens")}), k
    # the engine's own configuration is in both run logs, alike (Ray: asked of the engine actor)
    logs = [[json.loads(x) for x in SweepPaths.under(tmp_path / ex).run_log.read_text().splitlines()]
            for ex in ("local", "ray")]
    hashes = [{r.get("engine_config_hash") for r in rows} for rows in logs]
    assert hashes[0] == hashes[1] and len(hashes[0]) == 1 and None not in hashes[0], hashes


def test_killed_engine_actor_changes_nothing(ray_local: str, demo: tuple[list[Path], Path], tmp_path: Path,
                                             clean: dict[tuple[str, str, str], dict[str, str]]) -> None:
    items, store = demo
    res = tmp_path / "ray"
    killed: list[int] = []

    def killer() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            pids = engine_actor_pids()
            if pids and len(read_csv(res / CSV_NAME)) >= 20:
                kill(pids[0])
                killed.append(pids[0])
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    run_sweep(items, store, res, "ray", FAULT_CONDS, FAULT_LIMIT, rules=write_sweep_rules(tmp_path / "slow.json", 0.05),
              workers=1)
    t.join()
    assert killed, "the engine actor was never seen mid-run"
    assert sweep_rows(res) == clean
    assert set(raw_keys(res).values()) == {1}  # no raw line twice either


def test_killed_driver_then_rerun_completes(ray_local: str, demo: tuple[list[Path], Path], tmp_path: Path,
                                            clean: dict[tuple[str, str, str], dict[str, str]]) -> None:
    items, store = demo
    res = tmp_path / "ray"
    argv = [sys.executable, "-m", "benchcheck", "sweep", "run"]
    for p in items:
        argv += ["--items", str(p)]
    argv += ["--store", str(store), "--results", str(res), "--conds", FAULT_CONDS, "--limit", str(FAULT_LIMIT),
             "--engine", "scripted", "--rules", str(write_sweep_rules(tmp_path / "slow.json", 0.05)),
             "--workers", "1", "--no-progress", "--executor", "ray", "--ray-address", ray_local]
    # A second driver on the same cluster, killed with SIGKILL once it has written some rows.
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while time.time() < deadline and p.poll() is None and len(read_csv(res / CSV_NAME)) < 20:
        time.sleep(0.05)
    assert p.poll() is None, "the driver finished before it could be killed"
    p.kill()
    p.wait()
    partial = len(read_csv(res / CSV_NAME))
    assert 0 < partial < len(clean)
    run_sweep(items, store, res, "ray", FAULT_CONDS, FAULT_LIMIT, rules=write_sweep_rules(tmp_path / "r.json"))
    assert sweep_rows(res) == clean


def test_an_engine_that_cannot_be_built_is_one_line_before_any_row(ray_local: str, demo: tuple[list[Path], Path],
                                                                   tmp_path: Path) -> None:
    items, store = demo
    with pytest.raises(ValueError, match=r"^--model /nonexistent/model: no such folder$") as e:
        run_sweep(items, store, tmp_path / "r", "ray", "v_blind", 1, engine="hf", model="/nonexistent/model")
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value)
    assert not (tmp_path / "r" / CSV_NAME).exists()
