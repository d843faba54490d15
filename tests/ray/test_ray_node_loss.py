"""A node lost mid-run loses only in-flight work: the engine's node is removed from a three-node
cluster while the step runs; the rows end whole and single, equal to the local runner's, either
in that run (Ray moved the work) or after the same command is run again."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from ray_helpers import decisions, n_rows, run_step, write_rules

from benchcheck.cli.common import load_items_reporting
from benchcheck.executors.ray_cluster import ENGINE_SLOT
from benchcheck.executors.registry import run_screen_job as run_job
from benchcheck.screen.job import ShardJob


@pytest.mark.slow
def test_node_lost_mid_run_loses_only_in_flight_work(pool: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    import ray

    items, _ = pool
    run_step(items, tmp_path / "clean", 1, "local", rules=write_rules(tmp_path / "r.json"))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    doomed = cluster.add_node(num_cpus=1, resources={ENGINE_SLOT: 1})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        res = tmp_path / "ray"
        slow = write_rules(tmp_path / "slow.json", delay_s=0.02)

        def lose_node() -> None:
            deadline = time.time() + 120
            while time.time() < deadline and n_rows(res / "step1") < 30:
                time.sleep(0.05)
            cluster.add_node(num_cpus=1, resources={ENGINE_SLOT: 1})  # somewhere for the engine to go
            cluster.remove_node(doomed, allow_graceful=False)

        t = threading.Thread(target=lose_node)
        t.start()
        job = ShardJob(items=(str(items),), results=str(res), step=1, engine="scripted", rules=str(slow),
                       progress=False, executor="ray", batch_items=4)
        lines: list[str] = []
        first = run_job(job, lambda *a: load_items_reporting(*a[:2], True), lines.append)
        t.join()
        assert first in (0, 3), lines
        if first == 3:  # Ray could not move the work: the same command continues
            run_step(items, res, 1, "ray", rules=slow, batch_items=4)
        assert decisions(res / "step1") == decisions(tmp_path / "clean" / "step1")
    finally:
        ray.shutdown()
        cluster.shutdown()
