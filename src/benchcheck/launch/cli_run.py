"""The body of ``benchcheck launch``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchcheck.launch import knobs
from benchcheck.launch.host import LaunchPlan, run_host
from benchcheck.launch.servers import ServerOptions, port0_shown, server_ports, visible_gpus, vllm_available
from benchcheck.screen.engine_args import DEFAULT_WORKERS, resolve_model
from benchcheck.screen.job import ShardJob, plan_lines, ready_job
from benchcheck.screen.steps import STEPS
from benchcheck.shard import HostShard, ServerRanks, parse_host_shard


@dataclass(frozen=True, slots=True)
class LaunchArgs:
    step: int
    gpus: int | None
    model: str | None
    revision: str | None
    served_model_name: str | None
    port0: int  # AUTO_PORT: --port0 auto
    max_num_seqs: int
    gpu_util: float
    max_model_len: int | None
    workers: int | None
    logs: str
    shard: str | None
    server: str
    server_timeout: float
    plan_only: bool
    job: ShardJob  # the items, results and filters every client shard works on
    python: str = sys.executable  # PY
    vllm: str = "vllm"  # VLLM
    sources: dict[str, str] = field(default_factory=dict)  # knob name -> flag | env | default


def served_name(model: str, given: str | None) -> str:
    """The name clients ask for: given, else the hub name, else the checkpoint folder's name."""
    if given:
        return given
    p = Path(model)
    return p.name if p.exists() else model


def remaining(job: ShardJob, load: Callable[..., Any], echo: Callable[[str], None]) -> int:
    """Print the step's plan (REMAINING_TOTAL=...) through the same planner the clients use."""
    for line in plan_lines(job, load, quiet=True):
        echo(line)
    return 0


def servers_match(shard: HostShard, n: int) -> None:
    """Refuse (``ValueError``) server ranks ``a-b/N`` that name another number of servers than
    the host runs: ranks without a server would leave their share to no client, and servers
    without a rank would have no share of their own."""
    if isinstance(shard, ServerRanks) and shard.count != n:
        raise ValueError(f"--shard {shard} names {shard.count} servers but this host runs {n} (--gpus, or every "
                         f"visible GPU); give --gpus {shard.count} or ranks of {n} servers")


def run_launch(a: LaunchArgs, load: Callable[..., Any], echo: Callable[[str], None]) -> int:
    if a.step not in STEPS:
        raise ValueError(f"unknown step {a.step}")
    job = replace(a.job, step=a.step, shard=None)
    # Read before --plan-only answers: a bad --shard is refused there as it is on a real launch.
    shard = parse_host_shard(a.shard)
    if a.plan_only:
        # and the ports, as a real launch reads them before it starts a server
        n = a.gpus if a.gpus is not None else max(1, len(visible_gpus()))
        servers_match(shard, n)
        server_ports(a.port0, n)
        return remaining(job, load, echo)
    # The clients' own preconditions, read before any server starts: a visual step without
    # frames, or a step with nothing eligible, stopped every client at once, but only after
    # the servers (minutes of model loading per GPU) were up, and the reason was in their logs.
    ready = ready_job(job, load, echo)
    if isinstance(ready, int):
        return ready
    spec = STEPS[a.step]
    model, revision = resolve_model(spec, a.model, a.revision)
    gpus = visible_gpus()
    detected = len(gpus)
    n = a.gpus if a.gpus is not None else max(1, detected)
    if n < 1:
        raise ValueError("--gpus must be at least 1")
    servers_match(shard, n)
    use_vllm = a.server == "vllm" or (a.server == "auto" and vllm_available(a.vllm) and detected > 0)
    if a.server == "vllm" and not vllm_available(a.vllm):
        raise ValueError(f"--server vllm: {a.vllm} is not installed (set --vllm or VLLM)")
    opts = ServerOptions(model=model, served_name=served_name(model, a.served_model_name), revision=revision,
                         port0=a.port0, gpu_util=a.gpu_util, max_num_seqs=a.max_num_seqs,
                         max_model_len=a.max_model_len, use_vllm=use_vllm, python=a.python, vllm=a.vllm)
    workers = a.workers or DEFAULT_WORKERS[a.step]
    used = {"step": a.step, "gpus": n, "workers": workers, "port0": port0_shown(a.port0), "gpu_util": a.gpu_util,
            "max_num_seqs": a.max_num_seqs, "python_exe": a.python, "vllm_cmd": a.vllm, "bench": job.bench}
    plan = LaunchPlan(step=a.step, n_servers=n, gpus=tuple(gpus[:n]), options=opts, job=job, workers=workers,
                      logs=Path(a.logs), shard=shard, server_timeout_s=a.server_timeout,
                      knobs=knobs.note(used, a.sources))
    code = run_host(plan, echo)
    remaining(job, load, echo)
    return code
