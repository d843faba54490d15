"""The executors, looked up by name: who works a task's units (docs/ARCHITECTURE.md, "run_task and executors").

Every executor works units through ``unit_loop`` (``run_task``, or on Ray its pieces) with the
task's adapter; tasks never import an executor. ``screen`` and ``sweep run`` pick one with
``--executor`` (the ones ``selectable``); ``launch`` (one server per GPU and one client shard per
server on this host) and ``slurm`` (an array whose tasks run ``launch`` or ``screen``) have their
own commands and run the local executor in each client. Each entry names, per task, its run
function and its refusals (``module:function``, imported when used: Ray is an optional extra).
An option an executor cannot apply is refused with one line (exit 2), never dropped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchcheck.screen.job import ShardJob
    from benchcheck.sweep.job import SweepArgs
    from benchcheck.sweep.runner import SweepSummary

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Executor:
    name: str
    what: str  # one line for help and docs
    run: Mapping[str, str] = field(default_factory=dict)  # task -> "module:function"
    refuse: Mapping[str, str] = field(default_factory=dict)  # task -> "module:function" (a job -> why not, or None)
    selectable: bool = True  # offered by --executor

    def function(self, table: Mapping[str, str], task: str) -> Callable[..., Any]:
        if task not in table:
            raise ValueError(f"--executor {self.name} does not run {task}")
        module, _, name = table[task].partition(":")
        fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return fn

    def refusal(self, task: str, job: Any) -> str | None:
        if task not in self.refuse:
            return None
        why: str | None = self.function(self.refuse, task)(job)
        return why


EXECUTORS: dict[str, Executor] = {e.name: e for e in (
    Executor("local", "this process: units in one event loop, engine calls in flight",
             {"screen": "benchcheck.executors.local:run_screen", "sweep": "benchcheck.executors.local:run_sweep"},
             {"screen": "benchcheck.executors.local:refuse_screen",
              "sweep": "benchcheck.executors.local:refuse_sweep"}),
    Executor("ray", "a Ray Data pipeline: CPU actors build requests, engine actors answer (docs/ray.md)",
             {"screen": "benchcheck.executors.ray_job:run_screen", "sweep": "benchcheck.executors.ray_sweep:run_sweep"},
             {"screen": "benchcheck.executors.ray_job:refuse_screen",
              "sweep": "benchcheck.executors.ray_sweep:refuse_sweep"}),
    Executor("launch", "one inference server per GPU and one local client shard per server (benchcheck launch)",
             {"screen": "benchcheck.launch.cli_run:run_launch",
              "sweep": "benchcheck.launch.sweep_servers:launch_sweep"},
             selectable=False),
    Executor("slurm", "an sbatch array whose tasks run launch or screen (benchcheck slurm script)",
             {"screen": "benchcheck.launch.slurm:render_sbatch"}, selectable=False),
)}


def executor(name: str) -> Executor:
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")
    return EXECUTORS[name]


def choices() -> list[str]:
    """What ``--executor`` offers."""
    return [e.name for e in EXECUTORS.values() if e.selectable]


def run_screen_job(job: ShardJob, load: Callable[..., Any], echo: Echo, plan_only: bool = False) -> int:
    """A screening job on its executor: refused options first (``ValueError``, exit 2), the plan
    (``--plan-only``, the same on every executor), else the executor's run. Exit 0 ran, 2 nothing
    can run, 3 stopped early (rerun to go on)."""
    from benchcheck.screen.job import print_plan, ready_job

    ex = executor(job.executor)
    why = ex.refusal("screen", job)
    if why:
        raise ValueError(why)
    if plan_only:
        return print_plan(job, load, echo)
    ready = ready_job(job, load, echo)
    if isinstance(ready, int):
        return ready
    code: int = ex.function(ex.run, "screen")(ready, echo)
    return code


def run_sweep_job(a: SweepArgs, echo: Echo) -> SweepSummary:
    """A sweep on its executor: refused options first (``ValueError``, exit 2), the plan (nothing
    left: said, an empty summary), else the executor's run (``PreconditionError`` before any row)."""
    from benchcheck.sweep.cli_run import planned
    from benchcheck.sweep.runner import SweepSummary

    ex = executor(a.executor)
    why = ex.refusal("sweep", a)
    if why:
        raise ValueError(why)
    p = planned(a, echo)
    if p is None:
        return SweepSummary()
    summary: SweepSummary = ex.function(ex.run, "sweep")(a, *p, echo)
    return summary
