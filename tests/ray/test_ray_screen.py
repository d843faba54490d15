"""``screen --executor ray`` gives the local runner's decisions, keeps them when an engine actor is
killed mid-run, and a killed driver's run is completed by the same command run again."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from pathlib import Path

from ray_helpers import decisions, engine_actor_pids, kill, n_rows, ok_rows, run_step, write_rules


def test_steps_1_to_3_scripted_equal_local(ray_local: str, pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, frames = pool
    rules = write_rules(tmp_path / "rules.json")
    for step in (1, 2, 3):
        run_step(items, tmp_path / "local", step, "local", frames, rules=rules, limit=12)
        lines = run_step(items, tmp_path / "ray", step, "ray", frames, rules=rules, limit=12)
        a, b = decisions(tmp_path / "local" / f"step{step}"), decisions(tmp_path / "ray" / f"step{step}")
        assert a and a == b, step
        assert any("engine actors" in x and "object store peak" in x for x in lines)
        if step > 1:
            rows = ok_rows(tmp_path / "ray" / f"step{step}").values()
            assert all(r["frames"]["n"] == (1 if step == 2 else 32) for r in rows)
    assert (tmp_path / "ray" / "step3" / "run_spec.json").read_text() == (
        tmp_path / "local" / "step3" / "run_spec.json").read_text()
    # Rerun: nothing left, nothing added.
    before = n_rows(tmp_path / "ray" / "step3")
    run_step(items, tmp_path / "ray", 3, "ray", frames, rules=rules, limit=12)
    assert n_rows(tmp_path / "ray" / "step3") == before


def test_steps_1_to_3_tiny_model_equal_local(ray_local: str, pool: tuple[Path, Path], tmp_path: Path,
                                             tiny_model: Path) -> None:
    items, frames = pool
    for step in (1, 2, 3):
        run_step(items, tmp_path / "local", step, "local", frames, engine="hf", model=tiny_model, limit=1)
        run_step(items, tmp_path / "ray", step, "ray", frames, engine="hf", model=tiny_model, limit=1)
        a, b = ok_rows(tmp_path / "local" / f"step{step}"), ok_rows(tmp_path / "ray" / f"step{step}")
        assert a and set(a) == set(b), step
        for i in a:
            assert (a[i]["removed"], a[i].get("picks", a[i].get("pick"))) == (
                b[i]["removed"], b[i].get("picks", b[i].get("pick"))), (step, i)
            # Batches are cut differently (padding): the same numbers up to float noise.
            flat_a = [x for row in a[i]["lp"] for x in row] if step == 1 else a[i]["lp"]
            flat_b = [x for row in b[i]["lp"] for x in row] if step == 1 else b[i]["lp"]
            assert all(math.isclose(x, y, abs_tol=1e-3) for x, y in zip(flat_a, flat_b, strict=True)), (step, i)


def test_killed_engine_actor_changes_nothing(ray_local: str, pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, _ = pool
    run_step(items, tmp_path / "clean", 1, "local", rules=write_rules(tmp_path / "r.json"))
    slow = write_rules(tmp_path / "slow.json", delay_s=0.02)
    killed: list[int] = []

    def killer() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            pids = engine_actor_pids()
            if pids and n_rows(tmp_path / "ray" / "step1") >= 30:
                kill(pids[0])
                killed.append(pids[0])
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    run_step(items, tmp_path / "ray", 1, "ray", rules=slow, batch_items=4, workers=1)
    t.join()
    assert killed, "the engine actor was never seen mid-run"
    assert decisions(tmp_path / "ray" / "step1") == decisions(tmp_path / "clean" / "step1")


def test_killed_driver_then_rerun_completes(ray_local: str, pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, _ = pool
    rules = write_rules(tmp_path / "r.json")
    run_step(items, tmp_path / "clean", 1, "local", rules=rules)
    slow = write_rules(tmp_path / "slow.json", delay_s=0.02)
    res = tmp_path / "ray"
    # A second driver on the same cluster, killed with SIGKILL once it has written some rows.
    p = subprocess.Popen([sys.executable, "-m", "benchcheck", "screen", "--items", str(items), "--step", "1",
                          "--results", str(res), "--engine", "scripted", "--rules", str(slow), "--no-progress",
                          "--batch-items", "4", "--workers", "1", "--executor", "ray", "--ray-address", ray_local],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while time.time() < deadline and p.poll() is None and n_rows(res / "step1") < 30:
        time.sleep(0.05)
    assert p.poll() is None, "the driver finished before it could be killed"
    p.kill()
    p.wait()
    partial = n_rows(res / "step1")
    assert 0 < partial < len(decisions(tmp_path / "clean" / "step1"))
    run_step(items, res, 1, "ray", rules=rules)
    assert decisions(res / "step1") == decisions(tmp_path / "clean" / "step1")
