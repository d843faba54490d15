"""`launch --shard a-b/N`: hosts of different sizes get work in proportion to their servers.

With `--shard i/n` every host of an array takes 1/n of the units whatever its GPU count (the
hosts cannot scale their shares without each other's counts), so an 8-GPU host and a 4-GPU host
each took half: the 4-GPU host's servers had twice the items of the 8-GPU host's and the pass
lasted as long as that half. A host that names its servers' ranks among all hosts' servers
(`0-7/12` and `8-11/12`) gives server j the flat share a+j of N, as data-parallel ranks split work.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from screen_helpers import cli, ok_rows
from test_screen_launch import free_port_block

from benchcheck.cli.common import load_items_reporting
from benchcheck.launch.host import LaunchPlan, client_job
from benchcheck.launch.servers import ServerOptions, server_specs
from benchcheck.screen.assemble import parallel_units
from benchcheck.screen.job import ShardJob, ready_job
from benchcheck.screen.runner import my_units
from benchcheck.shard import parse_host_shard
from benchcheck.store import read_rows

DEMO_ITEMS = 269


@pytest.fixture()
def pool(tmp_path: Path) -> Path:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "items"


def quiet_load(paths: Any, columns: Any, quiet: bool = False) -> Any:
    return load_items_reporting(paths, columns, True)


def ranks(hosts: list[int]) -> list[str]:
    """Each host's `--shard a-b/N`: its servers' ranks among all hosts' servers."""
    starts = [sum(hosts[:k]) for k in range(len(hosts))]
    return [f"{a}-{a + n - 1}/{sum(hosts)}" for a, n in zip(starts, hosts, strict=True)]


def client_items(pool: Path, results: Path, hosts: list[int], max_unit: int) -> dict[tuple[int, int], list[str]]:
    """(host, server) -> the items its client works, as `launch --shard a-b/N` plans them."""
    opts = ServerOptions(model="m", served_name="vlm", revision=None)
    base = ShardJob(items=(str(pool),), results=str(results), step=1, max_unit=max_unit)
    out = {}
    for h, (n, spec) in enumerate(zip(hosts, ranks(hosts), strict=True)):
        gpus = tuple(str(g) for g in range(n))
        plan = LaunchPlan(step=1, n_servers=n, gpus=gpus, options=opts, job=base, workers=4, logs=results,
                          shard=parse_host_shard(spec))
        for s in server_specs(n, opts, gpus):
            r = ready_job(client_job(plan, s), quiet_load, lambda _line: None)
            assert not isinstance(r, int)
            units = my_units(r.first, r.shard, max_unit, r.ctx.unit_basis())
            out[(h, s.index)] = [f"{u.bench}/{i.item_id}" for u in units for i in u.items]
    return out


@pytest.mark.parametrize("hosts", [[8, 4], [4, 8], [3, 1, 2]], ids=lambda h: "+".join(map(str, h)))
def test_hosts_share_in_proportion_to_their_servers(pool: Path, tmp_path: Path, hosts: list[int]) -> None:
    max_unit = 10
    got = client_items(pool, tmp_path / "res", hosts, max_unit)
    counts = Counter(i for items in got.values() for i in items)
    assert sum(counts.values()) == len(counts) == DEMO_ITEMS  # every item to exactly one client
    total = sum(hosts)
    for h, n in enumerate(hosts):
        load = sum(len(items) for (host, _), items in got.items() if host == h)
        # each server's share is within a unit of the even one, so a host's within a unit per server
        assert abs(load - DEMO_ITEMS * n / total) <= n * max_unit, (h, load)


def test_ranks_that_do_not_fit_are_refused_in_one_line(pool: Path, tmp_path: Path) -> None:
    common = ["launch", "--step", "1", "--items", str(pool), "--results", str(tmp_path / "res"), "--plan-only"]
    for shard, gpus, words in [("0-1/3", "1", "names 2 servers but this host runs 1"),
                               ("2-1/3", "1", "or a-b/N (this host"), ("1-3/3", "3", "or a-b/N (this host"),
                               ("a-1/3", "2", "or a-b/N (this host")]:
        r = cli(*common, "--shard", shard, "--gpus", gpus)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr, (shard, r.stderr)
    assert cli(*common, "--shard", "1-2/3", "--gpus", "2").returncode == 0


def test_launch_on_a_two_gpu_and_a_one_gpu_host_by_ranks_does_every_item_once(pool: Path, tmp_path: Path,
                                                                              tiny_model: Path) -> None:
    """Ranks 0-1 of 3 on a two-server host and 2-2 of 3 on a one-server host, CPU servers on
    loopback: one share per server, every item once, and a rerun adds nothing."""
    res, rows_after = tmp_path / "served", []
    common = ["--items", str(pool), "--limit", "8", "--model", str(tiny_model), "--results", str(res),
              "--max-unit", "2", "--workers", "4", "--server-timeout", "240"]

    def host(rank: int, shard: str, gpus: int) -> str:
        r = cli("launch", "--step", "1", "--shard", shard, "--gpus", str(gpus), "--port0",
                str(free_port_block(gpus)), "--logs", str(tmp_path / f"logs{rank}"), *common, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        rows_after.append(len(ok_rows(res / "step1")))
        return r.stdout

    host(0, "0-1/3", 2)
    last = host(1, "2-2/3", 1)
    assert re.search(r"^REMAINING_TOTAL=0$", last, re.M), last
    runs = list(read_rows(res / "run_log.jsonl"))
    assert sorted(r["shard_spec"] for r in runs) == ["0/3", "1/3", "2/3"]
    assert all(r["items_attempted"] > 0 for r in runs) and parallel_units(runs) == 3
    assert sum(r["items_attempted"] for r in runs) == rows_after[-1] == 23  # 8 per benchmark, one open-format
    host(1, "2-2/3", 1)
    assert rows_after[-1] == 23 and sum(r["items_attempted"] for r in read_rows(res / "run_log.jsonl")) == 23
    assert "step 1 shard 2-2/3" in (tmp_path / "logs1" / "launch_params.txt").read_text()
