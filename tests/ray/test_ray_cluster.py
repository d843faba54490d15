"""Two Ray nodes (``ray.cluster_utils.Cluster``): the engine slot on one node, CPU actors on both;
the rows equal the local runner's. Unit-level sizing of the stages is checked without Ray."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_helpers import decisions, run_step, run_sweep, sweep_rows, write_rules

from benchcheck.executors.ray_cluster import ENGINE_SLOT, RayUnavailable, placement_for


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    import ray

    if ray.is_initialized():  # another module's Ray (tests run out of their usual order)
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1, resources={ENGINE_SLOT: 1})
    ray.init(address=cluster.address, log_to_driver=False)
    yield str(cluster.address)
    ray.shutdown()
    cluster.shutdown()


def test_two_node_cluster_equals_local(two_nodes: str, pool: tuple[Path, Path], tmp_path: Path) -> None:
    import ray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    items, frames = pool
    rules = write_rules(tmp_path / "rules.json")
    for step in (1, 2, 3):
        run_step(items, tmp_path / "local", step, "local", frames, rules=rules, limit=6)
        run_step(items, tmp_path / "ray", step, "ray", frames, rules=rules, limit=6)
        a, b = decisions(tmp_path / "local" / f"step{step}"), decisions(tmp_path / "ray" / f"step{step}")
        assert a and a == b, step


def test_two_node_cluster_sweep_equals_local(two_nodes: str, demo: tuple[list[Path], Path], tmp_path: Path) -> None:
    from benchcheck.engines.rules.reference import DEFAULT_NAME
    from benchcheck.sweep.demo import DEMO_CONDS

    items, store = demo
    for ex in ("local", "ray"):
        run_sweep(items, store, tmp_path / ex, ex, DEMO_CONDS, 2, engine="reference", model=DEFAULT_NAME)
    a = sweep_rows(tmp_path / "local")
    assert a and len(a) == len({k[:2] for k in a}) * len(DEMO_CONDS.split(",")) and a == sweep_rows(tmp_path / "ray")


def test_placement_one_engine_per_gpu_else_per_slot() -> None:
    p = placement_for({"CPU": 16.0, "GPU": 2.0})
    assert (p.cpu_actors, p.engine_actors, p.engine_args()) == (15, 2, {"num_gpus": 1, "num_cpus": 0})
    p = placement_for({"CPU": 2.0, ENGINE_SLOT: 3.0})
    assert (p.cpu_actors, p.engine_actors, p.engine_args()["resources"]) == (1, 3, {ENGINE_SLOT: 1})
    with pytest.raises(RayUnavailable, match="no GPU and no 'engine_slot'"):
        placement_for({"CPU": 4.0})
