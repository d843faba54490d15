"""Sharding equals the reference; the Slurm rank fix; local processes as array tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections import Counter

import pytest
from foundation_reference import reference_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st

from benchcheck.shard import Unit, assign_units, parse_shard, plan_units, slurm_task


@pytest.fixture(scope="module")
def ref() -> types.SimpleNamespace:
    """The live seed reference; the tests that use it skip on a bare clone (golden vectors cover it)."""
    return reference_or_skip()

work_st = st.lists(
    st.tuples(st.text(alphabet="abcXYZ_", min_size=1, max_size=6),
              st.lists(st.text(alphabet="0123456789", min_size=1, max_size=5), max_size=60, unique=True)),
    max_size=8, unique_by=lambda t: t[0])


@settings(max_examples=200, deadline=None)
@given(work_st, st.integers(1, 25), st.integers(1, 7))
def test_plan_and_assign_match_reference(
    ref: types.SimpleNamespace, work: list[tuple[str, list[str]]], max_unit: int, n_tasks: int
) -> None:
    ours = plan_units(work, max_unit)
    theirs = ref.plan_units(work, max_unit)
    assert [(u.bench, u.part, u.n_parts, list(u.ids)) for u in ours] == [
        (b, p, n, list(ids)) for b, p, n, ids in theirs]
    for t in range(n_tasks):
        mine, loads = assign_units(ours, n_tasks, t)
        rmine, rloads = ref.assign_units(theirs, n_tasks, t)
        assert [(u.bench, u.part) for u in mine] == [(u[0], u[1]) for u in rmine]
        assert loads == rloads


def test_30000_items_split_in_two_equal_parts() -> None:
    units = plan_units([("B", [f"{i:05d}" for i in range(30000)])])
    assert [(u.part, u.n_parts, len(u.ids)) for u in units] == [(0, 2, 15000), (1, 2, 15000)]


def test_every_unit_goes_to_exactly_one_task() -> None:
    units = plan_units([(f"b{k}", [str(i) for i in range(k * 7 + 1)]) for k in range(20)], max_unit=30)
    owners = Counter()
    for t in range(4):
        for u in assign_units(units, 4, t)[0]:
            owners[(u.bench, u.part)] += 1
    assert len(owners) == len(units) and set(owners.values()) == {1}
    with pytest.raises(ValueError):
        assign_units(units, 4, 4)


def test_slurm_rank_subtracts_min_even_when_count_is_set() -> None:
    env = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4",
           "SLURM_ARRAY_TASK_COUNT": "4"}
    assert slurm_task(env) == (0, 4)
    ranks = [slurm_task({**env, "SLURM_ARRAY_TASK_ID": str(i)})[0] for i in range(1, 5)]
    assert ranks == [0, 1, 2, 3]
    stepped = {"SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_STEP": "2",
               "SLURM_ARRAY_TASK_COUNT": "4"}
    assert [slurm_task({**stepped, "SLURM_ARRAY_TASK_ID": str(i)}) for i in (0, 2, 4, 6)] == [
        (0, 4), (1, 4), (2, 4), (3, 4)]
    assert slurm_task({}) == (0, 1)


def test_reference_bug_is_real(ref: types.SimpleNamespace) -> None:
    env = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"}
    saved = dict(os.environ)
    try:
        os.environ.update(env)
        assert ref.slurm_task() == (1, 4)  # rank 0 never runs with --array=1-4
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_parse_shard() -> None:
    assert parse_shard(None) == (0, 1)
    assert parse_shard("2/5") == (2, 5)
    assert parse_shard("auto", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"}) == (3, 4)
    for bad in ("5/5", "x", "1-2"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_array_tasks_as_local_processes_cover_all_units() -> None:
    work = [(f"b{k}", [f"{k}-{i}" for i in range(k * 11 + 3)]) for k in range(9)]
    code = ("import json, sys; from benchcheck.shard import plan_units, assign_units, parse_shard\n"
            "work = json.loads(sys.argv[1]); t, n = parse_shard('auto')\n"
            "mine, _ = assign_units(plan_units(work, 25), n, t)\n"
            "print(json.dumps([[u.bench, u.part] for u in mine]))")
    got: Counter[tuple[str, int]] = Counter()
    for task_id in range(1, 5):  # sbatch --array=1-4
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task_id), "SLURM_ARRAY_TASK_MIN": "1",
               "SLURM_ARRAY_TASK_MAX": "4", "SLURM_ARRAY_TASK_COUNT": "4"}
        out = subprocess.run([sys.executable, "-c", code, json.dumps(work)], env=env, capture_output=True,
                             text=True, check=True, timeout=60).stdout
        got.update((b, p) for b, p in json.loads(out))
    expected = {(u.bench, u.part) for u in plan_units(work, 25)}
    assert set(got) == expected and set(got.values()) == {1}


def test_unit_is_frozen_record() -> None:
    u = Unit("b", 0, 1, ("x",))
    with pytest.raises(AttributeError):
        u.bench = "c"  # type: ignore[misc]
