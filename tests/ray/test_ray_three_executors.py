"""The three executors give the same rows: screening steps 1-6 of the ground-truth demo with the
reference engine, run locally, by launch's client shards (job files run by ``task run`` against two
``benchcheck serve --engine reference`` servers on loopback, through launch's own server lifecycle),
and on Ray."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import ok_rows, run_step

from benchcheck.launch.host import LaunchPlan, client_argv, client_job
from benchcheck.launch.lifecycle import with_servers
from benchcheck.launch.servers import ServerOptions, ServerSpec
from benchcheck.screen.job import ShardJob
from loopback import free_port

STEPS = range(1, 7)
SERVED = "reference-demo"


def _launched(items: list[Path], frames: Path, results: Path, logs: Path) -> None:
    specs = []
    for i in range(2):
        port = free_port()
        argv = (sys.executable, "-m", "benchcheck", "serve", "--engine", "reference", "--model", "rules",
                "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port))
        specs.append(ServerSpec(i, port, argv))
    base = ShardJob(items=tuple(map(str, items)), results=str(results), step=1, frames_root=str(frames))

    def clients(started: list[subprocess.Popen[bytes]]) -> int:
        for step in STEPS:
            opts = ServerOptions(model="rules", served_name=SERVED, revision=None)
            plan = LaunchPlan(step=step, n_servers=2, gpus=(), options=opts, job=base, workers=4, logs=logs)
            procs = []
            for s in specs:
                job = client_job(plan, s).write(logs / f"client_s{step}_{s.index}.job.json")
                procs.append(subprocess.Popen(client_argv(job), stdout=subprocess.DEVNULL))
                started.append(procs[-1])
            codes = [p.wait(timeout=600) for p in procs]
            assert codes == [0, 0], (step, codes)
        return 0

    logs.mkdir(parents=True)
    assert with_servers(specs, lambda s: logs / f"serve_{s.index}.log", logs, "test", 240, clients, print) == 0


def _decisions(step_dir: Path) -> dict[str, tuple[Any, ...]]:
    """What must not depend on the executor (the model's name and the hash follow the served id)."""
    return {i: (r["removed"], r["lp"], r.get("picks", r.get("pick")), r.get("frames"))
            for i, r in ok_rows(step_dir).items()}


def _same(a: dict[str, tuple[Any, ...]], b: dict[str, tuple[Any, ...]]) -> bool:
    def flat(x: Any) -> list[float]:
        return [v for row in x for v in (row if isinstance(row, list) else [row])]

    return set(a) == set(b) and all(
        a[i][0] == b[i][0] and a[i][2:] == b[i][2:]
        and all(math.isclose(x, y, abs_tol=1e-9) for x, y in zip(flat(a[i][1]), flat(b[i][1]), strict=True))
        for i in a)


@pytest.mark.slow  # six steps on three executors, two servers: ~3 min on the 2-core VM
def test_local_launch_and_ray_give_the_same_rows_on_the_demo(ray_local: str, demo: tuple[list[Path], Path],
                                                            tmp_path: Path) -> None:
    items, store = demo
    frames = store.parent / "frames" / "pool_frames"
    for step in STEPS:
        for ex in ("local", "ray"):
            run_step(items[0].parent, tmp_path / ex, step, ex, frames, engine="reference")
    _launched(items, frames, tmp_path / "launch", tmp_path / "logs")
    for step in STEPS:
        local = _decisions(tmp_path / "local" / f"step{step}")
        assert local, step
        assert local == _decisions(tmp_path / "ray" / f"step{step}"), step
        assert _same(local, _decisions(tmp_path / "launch" / f"step{step}")), step
