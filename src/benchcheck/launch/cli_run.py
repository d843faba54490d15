"""The body of ``benchcheck launch``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchcheck.launch.host import LaunchPlan, run_host
from benchcheck.launch.servers import ServerOptions, visible_gpus, vllm_available
from benchcheck.screen.engine_args import DEFAULT_WORKERS, resolve_model
from benchcheck.screen.steps import STEPS
from benchcheck.shard import parse_shard


@dataclass(frozen=True, slots=True)
class LaunchArgs:
    step: int
    gpus: int | None
    model: str | None
    revision: str | None
    served_model_name: str | None
    port0: int
    max_num_seqs: int
    gpu_util: float
    max_model_len: int | None
    workers: int | None
    logs: str
    shard: str | None
    server: str
    server_timeout: float
    plan_only: bool
    screen_args: tuple[str, ...]


def served_name(model: str, given: str | None) -> str:
    """The name clients ask for: given, else the hub name, else the checkpoint folder's name."""
    if given:
        return given
    p = Path(model)
    return p.name if p.exists() else model


def remaining(step: int, screen_args: tuple[str, ...]) -> int:
    """Print the step's plan (REMAINING_TOTAL=...) through the same planner the clients use."""
    cmd = [sys.executable, "-m", "benchcheck", "screen", "--step", str(step), "--plan-only", *screen_args]
    return subprocess.run(cmd, check=False).returncode


def run_launch(a: LaunchArgs, echo: Callable[[str], None]) -> int:
    if a.step not in STEPS:
        raise ValueError(f"unknown step {a.step}")
    if a.plan_only:
        return remaining(a.step, a.screen_args)
    spec = STEPS[a.step]
    model, revision = resolve_model(spec, a.model, a.revision)
    gpus = visible_gpus()
    detected = len(gpus)
    n = a.gpus if a.gpus is not None else max(1, detected)
    if n < 1:
        raise ValueError("--gpus must be at least 1")
    use_vllm = a.server == "vllm" or (a.server == "auto" and vllm_available() and detected > 0)
    if a.server == "vllm" and not vllm_available():
        raise ValueError("--server vllm: vllm is not installed")
    opts = ServerOptions(model=model, served_name=served_name(model, a.served_model_name), revision=revision,
                         port0=a.port0, gpu_util=a.gpu_util, max_num_seqs=a.max_num_seqs,
                         max_model_len=a.max_model_len, use_vllm=use_vllm)
    plan = LaunchPlan(step=a.step, n_servers=n, gpus=tuple(gpus[:n]), options=opts, screen_args=a.screen_args,
                      workers=a.workers or DEFAULT_WORKERS[a.step], logs=Path(a.logs), shard=parse_shard(a.shard),
                      server_timeout_s=a.server_timeout)
    code = run_host(plan, echo)
    remaining(a.step, a.screen_args)
    return code
