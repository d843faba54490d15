"""`benchcheck launch`: servers on this host, one client shard per server, then the remaining work.

Each client is a process of its own (``benchcheck task run JOB``) working a ``ShardJob`` written
beside its log: the job is data, not a `screen` command line, and the client ends in ``run_task``.

Ctrl-C (or SIGTERM) stops everything it started. A server that dies mid-run turns its items
into error rows (the client cannot reach it); the next run retries them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from benchcheck.launch.lifecycle import with_servers
from benchcheck.launch.servers import ServerOptions, ServerSpec, server_specs
from benchcheck.screen.job import ShardJob
from benchcheck.shard import WHOLE, HostShard, ServerRanks, format_host_shard, format_shard, nest_shards


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Everything a host run needs; each client works ``job`` against its own server."""

    step: int
    n_servers: int
    gpus: tuple[str, ...]  # GPU ids, server i on gpus[i]; empty: CPU servers
    options: ServerOptions
    job: ShardJob  # items, results and filters; each client's engine and shard are filled in
    workers: int
    logs: Path
    shard: HostShard = WHOLE  # this host's share of an array, or its servers' ranks among all hosts'
    server_timeout_s: float = 900.0
    knobs: str = ""  # the launcher's settings and where each came from, for launch_params.txt


def client_job(plan: LaunchPlan, server: ServerSpec) -> ShardJob:
    """The client shard for one server: its share of this host's share (``i/n:j/m``; ``j/m`` on a
    host that is the whole array), or its own rank's flat share when the host names its servers'
    ranks (``a-b/N``: server j works ``a+j/N``). Pure.

    Nested, not a global ``host rank * servers + server index`` of ``hosts * servers``: that
    needs every host to have as many servers as this one, and hosts of an array with different
    GPU counts planned different splits, so items went to two clients or to none. Ranks the user
    gives agree between hosts of any size, and weigh each host by its servers."""
    if isinstance(plan.shard, ServerRanks):
        shard = plan.shard.server(server.index)
    else:
        shard = nest_shards(*plan.shard, (server.index, plan.n_servers))
    return replace(plan.job, step=plan.step, engine="openai", endpoints=(server.url,),
                   model=plan.options.served_name, revision=plan.options.revision, workers=plan.workers,
                   shard=format_shard(shard), progress=False, gpus=1 if plan.gpus else 0)


def client_argv(job_file: Path | str, python: str = sys.executable) -> list[str]:
    """A client process: the program's own entry point on a job file, or ``-``: its job on stdin
    (isolation, not an API)."""
    return [python, "-m", "benchcheck", "task", "run", str(job_file)]


def run_host(plan: LaunchPlan, echo: Callable[[str], None]) -> int:
    """Start servers, wait, run the clients, stop servers. Returns the worst client exit code."""
    specs = server_specs(plan.n_servers, plan.options, plan.gpus)

    def run_clients(started: list[subprocess.Popen[bytes]], serving: list[ServerSpec]) -> int:
        clients = []
        for s in serving:
            log = plan.logs / f"client_s{plan.step}_gpu{s.index}.log"
            job = client_job(plan, s)
            job.write(plan.logs / f"client_s{plan.step}_gpu{s.index}.job.json")  # the record of what it runs
            # The client reads its job from stdin, a file no other process can replace: another
            # launch of the step with the same --logs writes the same job file, and a client that
            # read it after that worked the other launch's job against the other's server.
            with log.open("ab") as f, tempfile.TemporaryFile() as own:
                own.write(job.dumps())
                own.seek(0)
                p = subprocess.Popen(client_argv("-", plan.options.python), stdin=own, stdout=f,
                                     stderr=subprocess.STDOUT, start_new_session=True)
            clients.append(p)
            started.append(p)
        codes = [p.wait() for p in clients]
        for s, c in zip(serving, codes, strict=True):
            echo(f"client {s.index}: exit {c} (log {plan.logs / f'client_s{plan.step}_gpu{s.index}.log'})")
        return max(codes, default=0)

    return with_servers(specs, lambda s: plan.logs / f"vllm_s{plan.step}_gpu{s.index}.log", plan.logs,
                        f"step {plan.step} shard {format_host_shard(plan.shard)}"
                        + (f"; {plan.knobs}" if plan.knobs else ""), plan.server_timeout_s,
                        run_clients, echo)
