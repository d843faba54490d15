"""Each launch task of a `slurm script` array gets ports no other task of the array has.

The script gave task k ``--port0 8001 + 16 * (k % 256)``: a task of more than 16 GPUs ran its
servers into the next task's ports, and tasks k and k + 256 had the same ports, so two such tasks
on one node refused each other's ports (or one found the other's server healthy).
"""

from __future__ import annotations

import re
import subprocess

import pytest
from screen_helpers import cli

from benchcheck.launch.servers import LOWEST_PORT, MAX_PORT, server_ports
from benchcheck.launch.slurm import SlurmJob, render_sbatch

ARGS = ("--items", "items/", "--results", "results")


def task_ports(array: int, gpus: int) -> list[range]:
    """Every task's server ports, its --port0 evaluated by bash as the task would."""
    text = render_sbatch(SlurmJob(1, array, gpus, ARGS, port0=8001))
    expr = re.search(r"--port0 (\$\(\(.*?\)\)\)) ", text)
    assert expr, text
    loop = f'for SLURM_ARRAY_TASK_ID in $(seq 0 {array - 1}); do echo {expr.group(1)}; done'
    out = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, check=True).stdout.split()
    return [range(int(p), int(p) + gpus) for p in out]


@pytest.mark.parametrize(("array", "gpus"), [(2, 32), (3, 17), (300, 1), (2000, 16), (2, 8), (1, 64)])
def test_no_two_tasks_share_a_port(array: int, gpus: int) -> None:
    ports = task_ports(array, gpus)
    used = [p for r in ports for p in r]
    assert len(used) == len(set(used)) == array * gpus
    assert max(used) <= MAX_PORT


@pytest.mark.parametrize(("array", "gpus"), [(8000, 8), (2, 40000)])
def test_an_array_whose_ports_pass_the_highest_is_refused_in_one_line(array: int, gpus: int) -> None:
    r = cli("slurm", "script", "--step", "1", "--array", str(array), "--gpus-per-task", str(gpus), "--port0", "8001",
            "--", *ARGS)
    assert r.returncode == 2, r.stdout[-300:]
    assert r.stderr.count("\n") == 1 and "past 65535" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(("array", "gpus", "port0", "advice"), [
    (1, 2, 65535, "use --port0 65534 or lower (not below 1024), or --port0 auto"),
    (3, 2, 65535, "use --port0 65530 or lower (not below 1024), or --port0 auto"),
    (8000, 8, 8001, "use --port0 1536 or lower (not below 1024), at most 7191 tasks of 8 GPUs, or --port0 auto"),
    (8064, 8, 8001, "use --port0 1024, at most 7191 tasks of 8 GPUs, or --port0 auto"),
    # ports below 1024 are privileged: --port0 736 (which would fit) was advised here
    (8100, 8, 8001, "past 65535; no --port0 fits 64800 ports above the privileged ones (1024-65535 holds 64512); "
                    "use at most 7191 tasks of 8 GPUs, or --port0 auto"),
    (1, 70000, 1, "past 65535; no --port0 fits 70000 ports above the privileged ones (1024-65535 holds 64512); "
                  "use --port0 auto"),
])
def test_a_refused_array_is_told_a_way_that_fits(array: int, gpus: int, port0: int, advice: str) -> None:
    """A --port0 too high for one task's servers was told to "use at most 0 tasks"."""
    r = cli("slurm", "script", "--step", "1", "--array", str(array), "--gpus-per-task", str(gpus), "--port0",
            str(port0), "--", *ARGS)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.rstrip().endswith(advice), r.stderr
    if (m := re.search(r"--port0 (\d+)(?: or lower|,)", advice)) is not None:  # the advised first port fits
        render_sbatch(SlurmJob(1, array, gpus, ARGS, port0=int(m.group(1))))


@pytest.mark.parametrize("ports", [2, 4096, 64511, 64512, 64513, 65535, 65536, 10**6])
def test_no_advised_first_port_is_privileged(ports: int) -> None:
    # the highest --port0 that fits, never one below 1024; when none from 1024 fits, said so instead
    with pytest.raises(ValueError) as e:
        server_ports(MAX_PORT, ports)
    line = str(e.value)
    assert "\n" not in line and line.endswith("--port0 auto")
    advised = [int(p) for p in re.findall(r"use --port0 (\d+)", line)]
    if ports <= MAX_PORT - LOWEST_PORT + 1:
        assert advised == [MAX_PORT - ports + 1] and advised[0] >= LOWEST_PORT
        assert server_ports(advised[0], ports)[-1] == MAX_PORT
    else:
        assert advised == [] and f"no --port0 fits {ports} ports above the privileged ones" in line


def test_direct_tasks_start_no_servers_and_take_no_ports() -> None:
    text = render_sbatch(SlurmJob(1, 100000, 1, (*ARGS, "--engine", "hf"), direct=True))
    assert "--port0" not in text
