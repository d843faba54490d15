"""Shares of shares: `launch` hosts of an array with different GPU counts split it exactly.

A host's clients were given the flat shard ``rank * servers + server`` of ``hosts * servers``,
which only agreed between hosts of equal size: with an 8-GPU and a 4-GPU host, each planned
another split of the units, so some units went to two clients and some to none.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import pytest

from benchcheck.launch.host import LaunchPlan, client_job
from benchcheck.launch.servers import ServerOptions, server_specs
from benchcheck.screen.assemble import parallel_units
from benchcheck.screen.job import ShardJob
from benchcheck.shard import (
    Unit,
    assign_units,
    format_shard,
    nest_shards,
    parse_shard,
    parse_shard_path,
    plan_units,
    shard_units,
)

OPTS = ServerOptions(model="m", served_name="vlm", revision=None)
BASE = ShardJob(items=("items/",), results="res", step=1)


def client_shards(hosts: list[int], gpus: bool = True) -> dict[tuple[int, int], str]:
    """(host rank, server) -> the shard spec `launch --shard rank/len(hosts)` writes into the
    client's job, hosts[rank] being that host's server count. Pure."""
    out = {}
    for rank, n in enumerate(hosts):
        ids = tuple(str(g) for g in range(n)) if gpus else ()
        plan = LaunchPlan(step=1, n_servers=n, gpus=ids, options=OPTS, job=BASE, workers=4, logs=Path("logs"),
                          shard=parse_shard_path(f"{rank}/{len(hosts)}"))
        for s in server_specs(n, OPTS, ids):
            spec = client_job(plan, s).shard
            assert spec is not None
            out[(rank, s.index)] = spec
    return out


def units_of(n_benches: int, sizes: random.Random, max_unit: int) -> list[Unit]:
    work = [(f"B{b}", [f"{b}_{i:04d}" for i in range(sizes.randint(0, 60))]) for b in range(n_benches)]
    return [u for u in plan_units(work, max_unit) if u.ids]


MIXES = [[8, 4], [4, 8], [1, 8], [3, 5, 2], [8, 8, 4, 1], [2, 3, 5, 7, 1], [6], [1, 1, 1], [7, 7]]
MIXES += [list(m) for m in itertools.product([1, 2, 3, 4, 8], repeat=2)]
MIXES += [random.Random(s).choices(range(1, 9), k=random.Random(s).randint(2, 6)) for s in range(40)]


@pytest.mark.parametrize("hosts", MIXES, ids=lambda h: "+".join(map(str, h)))
def test_any_mix_of_host_sizes_covers_every_unit_once(hosts: list[int]) -> None:
    shards = client_shards(hosts)
    rng = random.Random(len(hosts) * 100 + sum(hosts))
    for n_benches, max_unit in ((1, 1), (3, 7), (6, 10), (2, 100), (9, 4)):
        units = units_of(n_benches, rng, max_unit)
        got: dict[tuple[int, int], list[Unit]] = {k: shard_units(units, parse_shard_path(v))
                                                   for k, v in shards.items()}
        counts = Counter((u.bench, u.part) for us in got.values() for u in us)
        assert set(counts) == {(u.bench, u.part) for u in units}, "a unit no client works"
        assert set(counts.values()) <= {1}, "a unit two clients work"
        for rank in range(len(hosts)):
            host = [u for (r, _), us in got.items() if r == rank for u in us]
            # The host's share is its 1/n of the array whatever its size: the other hosts need not
            # know it.
            assert sorted(host, key=lambda u: (u.bench, u.part)) == sorted(
                assign_units(units, len(hosts), rank)[0], key=lambda u: (u.bench, u.part))


def test_eight_and_four_gpu_hosts_get_shares_of_their_host_share() -> None:
    shards = client_shards([8, 4])
    assert [shards[(0, j)] for j in range(8)] == [f"0/2:{j}/8" for j in range(8)]
    assert [shards[(1, j)] for j in range(4)] == [f"1/2:{j}/4" for j in range(4)]


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_one_host_keeps_the_flat_shards_it_had(n: int) -> None:
    """Existing single-host commands write the same client shards and split units as before."""
    shards = client_shards([n])
    assert [shards[(0, j)] for j in range(n)] == [f"{j}/{n}" for j in range(n)]
    assert client_shards([n], gpus=False) == shards
    units = units_of(5, random.Random(n), 6)
    for j in range(n):
        assert shard_units(units, parse_shard_path(f"{j}/{n}")) == assign_units(units, n, j)[0]


def test_one_gpu_hosts_keep_the_array_shard() -> None:
    """`slurm script --gpus-per-task 1` (the documented case): each task's client is its array
    share, as before."""
    assert client_shards([1, 1, 1]) == {(r, 0): f"{r}/3" for r in range(3)}


def test_shard_specs_parse_and_format() -> None:
    assert parse_shard_path(None) == ((0, 1),) and parse_shard_path("2/5") == ((2, 5),)
    assert parse_shard_path("1/2:3/8") == ((1, 2), (3, 8)) and format_shard(((1, 2), (3, 8))) == "1/2:3/8"
    assert parse_shard_path("0/1:3/4") == ((3, 4),) and parse_shard_path("1/2:0/1") == ((1, 2),)
    assert parse_shard_path("0/1") == ((0, 1),) and nest_shards() == ((0, 1),)
    env = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert parse_shard_path("auto", env) == ((3, 4),) and parse_shard("auto", env) == (3, 4)
    for spec in ("2/5", "0/1", "1/2:3/8", "0/3:1/2:4/5"):
        assert format_shard(parse_shard_path(spec)) == spec or spec == "0/1"
    for bad in ("1/2:", ":0/2", "2/2:0/1", "1/2:0/0", "1/2:x/3", "1/2/3", "auto:0/2", "1/2:-1/3"):
        with pytest.raises(ValueError, match="expected auto, i/n") as e:
            parse_shard_path(bad)
        assert "\n" not in str(e.value)


def test_parallel_units_counts_the_clients_of_unequal_hosts() -> None:
    rows = [{"shard": 0, "n_shards": 2, "shard_spec": f"0/2:{j}/8"} for j in range(8)]
    rows += [{"shard": 1, "n_shards": 2, "shard_spec": f"1/2:{j}/4"} for j in range(4)]
    assert parallel_units(rows) == 12
    assert parallel_units(rows + rows) == 12  # a rerun of the same array
    assert parallel_units([{"shard": 1, "n_shards": 4}, {"shard": 0, "n_shards": 4, "shard_spec": "0/4"}]) == 4
    assert parallel_units([]) == 1
