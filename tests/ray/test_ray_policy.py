"""Ray runs the tasks' own adapters under the one policy: ``--extra-perms`` records what the local
runner records, rows under another spec are stale and redone, a down server stops the run, and an
option with no meaning on Ray is refused in one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ray_helpers import RULES, decisions, ok_rows, run_step, run_sweep, sweep_rows, write_rules, write_sweep_rules

from benchcheck.store import read_rows
from loopback import wait_health


def _extra(step_dir: Path) -> dict[str, tuple[str, str]]:
    return {i: (json.dumps(r.get("extra_perms")), json.dumps(r.get("extra_lp")))
            for i, r in ok_rows(step_dir).items() if "extra_n" in r}


def test_extra_perms_on_ray_record_the_local_rows(ray_local: str, pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, frames = pool
    rules = write_rules(tmp_path / "rules.json")
    for step in (1, 2):
        run_step(items, tmp_path / "local", step, "local", frames, rules=rules, limit=12, extra_perms=4)
        run_step(items, tmp_path / "ray", step, "ray", frames, rules=rules, limit=12, extra_perms=4)
        a, b = _extra(tmp_path / "local" / f"step{step}"), _extra(tmp_path / "ray" / f"step{step}")
        assert a and a == b, step
        assert all(len(json.loads(lp)) == 4 for _, lp in a.values())
        assert decisions(tmp_path / "local" / f"step{step}") == decisions(tmp_path / "ray" / f"step{step}")


def test_screen_rows_of_another_revision_are_stale_and_redone_on_ray(ray_local: str, pool: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    items, _ = pool
    rules = write_rules(tmp_path / "rules.json")
    port = _closed_port()
    server = subprocess.Popen([sys.executable, "-m", "benchcheck", "serve", "--engine", "scripted", "--model", "m",
                               "--rules", str(rules), "--served-model-name", "m", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_health(f"http://127.0.0.1:{port}", server)
        url = f"http://127.0.0.1:{port}/v1"
        res = tmp_path / "ray"
        run_step(items, res, 1, "ray", engine="openai", model=Path("m"), endpoints=(url,), limit=6,
                 revision="r1")
        first = ok_rows(res / "step1")
        # Another revision of the served model is another RunSpec hash: every row is stale, asked again.
        lines = run_step(items, res, 1, "ray", engine="openai", model=Path("m"), endpoints=(url,), limit=6,
                         revision="r2")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert any(f"{len(first)} asked again (stale rows)" in x for x in lines), lines
    spec = json.loads((res / "step1" / "run_spec.json").read_text())
    assert spec["model"]["revision"] == "r2"
    rows = [r for f in (res / "step1").glob("*.jsonl") for r in read_rows(f) if r.get("status", "ok") == "ok"]
    # Append-only: each item's old row stays, a new one under the new hash follows it.
    hashes = {i: [r["config_hash"] for r in rows if r["item_id"] == i] for i in first}
    assert len(rows) == 2 * len(first)
    assert all(h == [first[i]["config_hash"], spec["config_hash"]] for i, h in hashes.items())


def test_sweep_rows_under_another_token_budget_are_stale_and_redone_on_ray(
        ray_local: str, demo: tuple[list[Path], Path], tmp_path: Path) -> None:
    items, store = demo
    rules = write_sweep_rules(tmp_path / "r.json")
    run_sweep(items, store, tmp_path / "ray", "ray", "v_blind,v_1", 2, rules=rules, token_budget=30000)
    old = sweep_rows(tmp_path / "ray")
    lines = run_sweep(items, store, tmp_path / "ray", "ray", "v_blind,v_1", 2, rules=rules)
    new = sweep_rows(tmp_path / "ray")
    assert set(new) == set(old)
    redone = [k for k in new if new[k]["config_hash"] != old[k]["config_hash"]]
    assert redone and {k[2] for k in redone} == {"v_1"}  # v_blind shows no frames: the budget is not its spec
    run_sweep(items, store, tmp_path / "local", "local", "v_blind,v_1", 2, rules=rules)
    assert sweep_rows(tmp_path / "local") == new, lines


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # 8 engine-actor calls to a dead endpoint, each out of the openai engine's retries: ~2 min here
def test_a_down_server_stops_the_ray_run_and_fails_no_item(ray_local: str, pool: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    items, _ = pool
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    res = tmp_path / "ray"
    lines = run_step(items, res, 1, "ray", engine="openai", model=Path("m"), endpoints=(url,), workers=1,
                     expect=3)
    assert any("the engine is unreachable (8 calls in a row); stopping" in x for x in lines), lines
    rows = [x for f in (res / "step1").glob("*.jsonl") for x in read_rows(f)]
    assert rows and all(x["status"] == "error" and x["retry_free"] for x in rows)
    assert len(rows) < 40  # stopped, not the pool's 269 items
    assert not any(x.startswith("failed: ") for x in lines)


@pytest.mark.slow  # as above: ~100 s here
def test_the_sweep_on_ray_stops_on_a_down_server(ray_local: str, demo: tuple[list[Path], Path],
                                                 tmp_path: Path) -> None:
    items, store = demo
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    lines = run_sweep(items, store, tmp_path / "ray", "ray", "v_blind", None, engine="openai", model="m",
                      endpoints=(url,), workers=1, expect_aborted=True)
    assert any("sweep: the engine is unreachable (8 calls in a row); stopping" in x for x in lines), lines


def test_workers_of_a_serial_engine_are_refused_on_ray(ray_local: str, pool: tuple[Path, Path], tmp_path: Path,
                                                       tiny_model: Path) -> None:
    items, _ = pool
    with pytest.raises(ValueError, match=r"^--workers: engine hf runs one call at a time"):
        run_step(items, tmp_path / "ray", 1, "ray", engine="hf", model=tiny_model, workers=2)
    assert not ok_rows(tmp_path / "ray" / "step1")


def test_ray_asks_errors_again_and_gives_up_as_the_local_runner(ray_local: str, pool: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    items, _ = pool
    broken = [{"match": "Question: What color", "error": {"status": 500, "message": "broken"}}, *RULES]
    rules = write_rules(tmp_path / "r.json", base=broken)
    errors = {}
    for ex in ("local", "ray"):
        lines = run_step(items, tmp_path / ex, 1, ex, rules=rules, limit=8)
        rows = [r for f in (tmp_path / ex / "step1").glob("*.jsonl") for r in read_rows(f)]
        errors[ex] = Counter(r["item_id"] for r in rows if r.get("status") == "error")
        assert errors[ex] and set(errors[ex].values()) == {3}  # asked again in the run, given up after three
        assert sorted(x.split()[1] for x in lines if x.startswith("failed: ")) == sorted(errors[ex])
    assert errors["local"] == errors["ray"]
    assert decisions(tmp_path / "local" / "step1") == decisions(tmp_path / "ray" / "step1")
