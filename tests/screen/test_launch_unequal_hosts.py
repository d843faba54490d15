"""`launch --shard auto` on array hosts with different GPU counts: every item to one client shard.

Before, an 8-GPU host and a 4-GPU host of a two-task array gave their clients the shards
``0..7/16`` and ``4..7/8``: of the demo pool's 269 items (units of 10), 73 went to no client
and 76 to two, so the first pass left work for a rerun and doubled other work.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from screen_helpers import cli, decisions, ok_rows, write_rules
from test_screen_launch import free_port_block

from benchcheck.cli.common import load_items_reporting
from benchcheck.launch.host import LaunchPlan, client_job
from benchcheck.launch.servers import ServerOptions, server_specs
from benchcheck.screen.job import ShardJob, ready_job
from benchcheck.screen.runner import my_units
from benchcheck.screen.task import WorkUnit
from benchcheck.shard import parse_shard_path
from benchcheck.store import read_rows


@pytest.fixture()
def pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "items"


def quiet_load(paths: Any, columns: Any, quiet: bool = False) -> Any:
    return load_items_reporting(paths, columns, True)


def client_items(pool: Path, results: Path, hosts: list[int],
                 max_unit: int) -> tuple[dict[tuple[int, int], set[str]], list[set[str]]]:
    """(host rank, server) -> the items its client works, as `launch --shard auto` plans them on
    each task of an array (hosts[rank] GPUs on task rank): the real items, the job files' shards
    and the runner's own choice of units; and each host's share as a one-GPU task would have it."""
    opts = ServerOptions(model="m", served_name="vlm", revision=None)
    base = ShardJob(items=(str(pool),), results=str(results), step=1, max_unit=max_unit)
    out, shares = {}, []
    for rank, n in enumerate(hosts):
        env = {"SLURM_ARRAY_TASK_ID": str(rank), "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": str(len(hosts))}
        gpus = tuple(str(g) for g in range(n))
        plan = LaunchPlan(step=1, n_servers=n, gpus=gpus, options=opts, job=base, workers=4, logs=results,
                          shard=parse_shard_path("auto", env))
        for s in server_specs(n, opts, gpus):
            r = ready_job(client_job(plan, s), quiet_load, lambda _line: None)
            assert not isinstance(r, int)
            out[(rank, s.index)] = items_of(my_units(r.first, r.shard, max_unit, r.ctx.unit_basis()))
        shares.append(items_of(my_units(r.first, parse_shard_path("auto", env), max_unit, r.ctx.unit_basis())))
    return out, shares


def items_of(units: list[WorkUnit]) -> set[str]:
    ids = [f"{u.bench}/{i.item_id}" for u in units for i in u.items]
    assert len(ids) == len(set(ids))
    return set(ids)


@pytest.mark.parametrize("hosts", [[8, 4], [4, 8], [3, 1, 2]], ids=lambda h: "+".join(map(str, h)))
def test_unequal_hosts_give_every_item_to_one_client(pool: Path, tmp_path: Path, hosts: list[int]) -> None:
    got, shares = client_items(pool, tmp_path / "res", hosts, 10)
    counts = Counter(i for items in got.values() for i in items)
    assert sum(counts.values()) == len(counts) == 269, (
        f"{269 - len(counts)} items to no client, {sum(1 for c in counts.values() if c > 1)} to two or more")
    for rank, share in enumerate(shares):
        # A host's clients work its 1/n of the array, what a host of any size gets.
        assert set().union(*(items for (r, _), items in got.items() if r == rank)) == share


def test_a_folder_half_done_under_flat_shards_finishes_under_nested_ones(pool: Path, tmp_path: Path) -> None:
    """Rows are keyed by item and units by their part, not by shard: a results folder begun by an
    older launch (flat `i/n` client shards) is finished by the nested ones with each item once."""
    rules = write_rules(tmp_path / "rules.json")
    res = tmp_path / "res"
    common = ["--items", str(pool), "--step", "1", "--results", str(res), "--engine", "scripted", "--rules",
              str(rules), "--max-unit", "10", "--no-progress"]
    for flat in ("0/12", "5/12", "11/12"):  # three clients of an old two-host launch, then a crash
        assert cli("screen", *common, "--shard", flat).returncode == 0
    before = len(ok_rows(res / "step1"))
    assert 0 < before < 269
    for nested in [f"0/2:{j}/8" for j in range(8)] + [f"1/2:{j}/4" for j in range(4)]:
        r = cli("screen", *common, "--shard", nested)
        assert r.returncode == 0, r.stderr
        assert f"shard {nested}:" in r.stdout
    single = tmp_path / "single"
    assert cli("screen", *common[:5], str(single), *common[6:]).returncode == 0
    assert decisions(res / "step1") == decisions(single / "step1")  # 269 items, one ok row each
    runs = list(read_rows(res / "run_log.jsonl"))
    assert sum(r["items_attempted"] for r in runs) == 269
    assert {(r["shard"], r["n_shards"], r["shard_spec"]) for r in runs if ":" in r["shard_spec"]} >= {
        (0, 2, "0/2:7/8"), (1, 2, "1/2:3/4")}
    again = cli("screen", *common, "--shard", "1/2:3/4")
    assert again.returncode == 0 and " 0 ok" in again.stdout
    assert decisions(res / "step1") == decisions(single / "step1")
    bad = cli("screen", *common, "--shard", "1/2:4/4")
    assert bad.returncode == 2 and "expected auto, i/n" in bad.stderr and "Traceback" not in bad.stderr


def test_launch_on_a_two_gpu_and_a_one_gpu_host_does_every_item_once(pool: Path, tmp_path: Path,
                                                                     tiny_model: Path) -> None:
    """Two hosts of an array (`--shard 0/2 --gpus 2`, `--shard 1/2 --gpus 1`), CPU servers on
    loopback: the first pass does every item, once; rerunning a host's command adds nothing."""
    res, rows_after = tmp_path / "served", []
    common = ["--items", str(pool), "--limit", "8", "--model", str(tiny_model), "--results", str(res),
              "--max-unit", "2", "--workers", "4", "--server-timeout", "240"]

    def host(rank: int, gpus: int) -> str:
        r = cli("launch", "--step", "1", "--shard", f"{rank}/2", "--gpus", str(gpus), "--port0",
                str(free_port_block(gpus)), "--logs", str(tmp_path / f"logs{rank}"), *common, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        rows_after.append(len(ok_rows(res / "step1")))
        return r.stdout

    host(0, 2)
    last = host(1, 1)
    assert re.search(r"^REMAINING_TOTAL=0$", last, re.M), last
    runs = list(read_rows(res / "run_log.jsonl"))
    assert sorted(r["shard_spec"] for r in runs) == ["0/2:0/2", "0/2:1/2", "1/2"]
    assert all(r["items_attempted"] > 0 for r in runs)
    assert sum(r["items_attempted"] for r in runs) == rows_after[-1] == 23  # 8 per benchmark, one open-format
    host(1, 1)
    assert rows_after[-1] == 23 and len(list(read_rows(res / "run_log.jsonl"))) == 4
    assert "step 1 shard 1/2" in (tmp_path / "logs1" / "launch_params.txt").read_text()
