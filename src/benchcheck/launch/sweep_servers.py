"""``benchcheck launch --sweep``: the sweep's servers (SPEC section 5, seed 001) and its one client.

One server per GPU on ports 8011+i with ``--max-model-len 65536`` and
``--limit-mm-per-prompt '{"image": 1024}'`` (the fps ladders send up to 582 frames of 97
tokens), ``--max-num-seqs 32`` (8 on GPUs of 32 GB or less), then ONE ``benchcheck sweep run``
client given every endpoint: it round-robins over them with 6 workers per GPU. The exact server
lines go to ``logs/launch_params.txt``. Without vLLM, ``benchcheck serve`` stands in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchcheck.defaults import (
    GPU_UTIL,
    SMALL_GPU_MAX_SEQS,
    SWEEP_LIMIT_MM,
    SWEEP_MAX_MODEL_LEN,
    SWEEP_MAX_SEQS,
    SWEEP_PORT0,
)
from benchcheck.defaults import SWEEP_WORKERS_PER_ENDPOINT as SWEEP_WORKERS_PER_GPU
from benchcheck.launch import knobs
from benchcheck.launch.lifecycle import with_servers
from benchcheck.launch.servers import (
    ServerSpec,
    port0_shown,
    server_ports,
    visible_gpus,
    vllm_available,
)

SMALL_GPU_GIB = 40  # a 32 GB card (RTX 5090) reports a little under 32 GiB
SWEEP_GPU_UTIL = GPU_UTIL


@dataclass(frozen=True, slots=True)
class SweepLaunch:
    n_servers: int
    gpus: tuple[str, ...]
    model: str
    served_name: str
    revision: str | None
    use_vllm: bool
    max_num_seqs: int
    sweep_args: tuple[str, ...]  # --items ... --store ... --results ... [--conds ...] [--pilot]
    logs: Path
    port0: int = SWEEP_PORT0
    workers_per_gpu: int = SWEEP_WORKERS_PER_GPU
    gpu_util: float = SWEEP_GPU_UTIL
    server_timeout_s: float = 900.0
    python: str = sys.executable  # PY
    vllm: str = "vllm"  # VLLM
    knobs: str = ""  # the settings and their sources, for launch_params.txt
    max_model_len: int = SWEEP_MAX_MODEL_LEN  # --max-model-len: the servers' context (the client checks it)


def gpu_memory_gib() -> list[float]:
    """Total memory of each GPU nvidia-smi lists (empty without a driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [float(x) / 1024 for x in out.split() if x.replace(".", "", 1).isdigit()]


def default_max_seqs(memory_gib: Sequence[float]) -> int:
    """32 sequences per server; 8 when the smallest GPU has 32 GB or less (seed 001 MAX_SEQS)."""
    return SMALL_GPU_MAX_SEQS if memory_gib and min(memory_gib) <= SMALL_GPU_GIB else SWEEP_MAX_SEQS


def sweep_server_specs(p: SweepLaunch) -> list[ServerSpec]:
    """Server i on GPU ``gpus[i]`` (CPU servers when none), port 8011+i. Pure."""
    if p.gpus and p.n_servers > len(p.gpus):
        raise ValueError(f"{p.n_servers} servers asked for but only {len(p.gpus)} GPUs are visible")
    specs = []
    for i, port in enumerate(server_ports(p.port0, p.n_servers)):
        env = {"CUDA_VISIBLE_DEVICES": p.gpus[i]} if p.gpus else {}
        if p.use_vllm:
            argv = [p.vllm, "serve", p.model, "--served-model-name", p.served_name, "--host", "127.0.0.1",
                    "--port", str(port), "--gpu-memory-utilization", str(p.gpu_util), "--max-num-seqs",
                    str(p.max_num_seqs), "--max-model-len", str(p.max_model_len), "--limit-mm-per-prompt",
                    SWEEP_LIMIT_MM]
        else:
            argv = [p.python, "-m", "benchcheck", "serve", "--model", p.model, "--served-model-name",
                    p.served_name, "--host", "127.0.0.1", "--port", str(port), "--max-batch-size",
                    str(p.max_num_seqs), "--max-model-len", str(p.max_model_len), "--device",
                    "cuda" if p.gpus else "cpu"]
        if p.revision:
            argv += ["--revision", p.revision]
        specs.append(ServerSpec(i, port, tuple(argv), env, reports_port=not p.use_vllm))
    return specs


def sweep_client_argv(p: SweepLaunch, specs: Sequence[ServerSpec]) -> list[str]:
    """The one client: every endpoint (round-robin), 6 workers per GPU. Pure."""
    argv = [p.python, "-m", "benchcheck", "sweep", "run", "--engine", "openai", "--model", p.served_name,
            "--workers", str(p.workers_per_gpu * len(specs)), "--no-progress", "--max-model-len", str(p.max_model_len)]
    for s in specs:
        argv += ["--endpoint", s.url]
    if p.revision:
        argv += ["--revision", p.revision]
    return argv + list(p.sweep_args)


@dataclass(frozen=True, slots=True)
class SweepKnobs:
    """Seed 001's launcher settings beyond the shared ones (None: the sweep's default), and where
    each came from (knob name -> flag | env | default) for launch_params.txt."""

    workers_per_gpu: int | None = None  # WORKERS
    gpu_util: float | None = None  # GPU_UTIL
    python: str = sys.executable  # PY
    vllm: str = "vllm"  # VLLM
    sources: Mapping[str, str] = field(default_factory=dict)


def plan_sweep_launch(gpus_wanted: int | None, model: str, served_name: str, revision: str | None, server: str,
                      max_num_seqs: int | None, sweep_args: Sequence[str], logs: Path,
                      port0: int = SWEEP_PORT0, settings: SweepKnobs | None = None,
                      shown: Mapping[str, object] | None = None, max_model_len: int | None = None,
                      server_timeout_s: float = 900.0) -> SweepLaunch:
    """The sweep's launch; ``shown``: the client's knobs (PILOT, BENCH, CONDS) for launch_params.txt."""
    k = settings or SweepKnobs()
    shown = shown or {}
    gpus = visible_gpus()
    n = gpus_wanted if gpus_wanted is not None else max(1, len(gpus))
    if n < 1:
        raise ValueError("--gpus must be at least 1")
    if server == "vllm" and not vllm_available(k.vllm):
        raise ValueError(f"--server vllm: {k.vllm} is not installed (set --vllm or VLLM)")
    use_vllm = server == "vllm" or (server == "auto" and vllm_available(k.vllm) and bool(gpus))
    seqs = max_num_seqs or default_max_seqs(gpu_memory_gib()[: n] if gpus else [])
    plan = SweepLaunch(n, tuple(gpus[:n]), model, served_name, revision, use_vllm, seqs, tuple(sweep_args), logs,
                       port0, workers_per_gpu=k.workers_per_gpu or SWEEP_WORKERS_PER_GPU,
                       gpu_util=SWEEP_GPU_UTIL if k.gpu_util is None else k.gpu_util, python=k.python,
                       vllm=k.vllm, server_timeout_s=server_timeout_s,
                       max_model_len=max_model_len or SWEEP_MAX_MODEL_LEN)
    return replace(plan, knobs=knobs.note({"gpus": n, "workers": plan.workers_per_gpu, "port0": port0_shown(port0),
                                           "gpu_util": plan.gpu_util, "max_num_seqs": seqs, "python_exe": k.python,
                                           "vllm_cmd": k.vllm, **shown}, k.sources))


def run_sweep_launch(p: SweepLaunch, echo: Callable[[str], None]) -> int:
    """Start the servers, wait until healthy, run the client, stop them. Returns the client's exit code."""
    specs = sweep_server_specs(p)

    def run_client(started: list[subprocess.Popen[bytes]], serving: list[ServerSpec]) -> int:
        echo(f"sweep client over {len(serving)} endpoints")
        client = subprocess.Popen(sweep_client_argv(p, serving), start_new_session=True)
        started.append(client)
        return client.wait()

    return with_servers(specs, lambda s: p.logs / f"vllm_gpu{s.index}.log", p.logs,
                        f"sweep: {p.n_servers} servers, max-num-seqs {p.max_num_seqs}, "
                        f"{p.workers_per_gpu} workers per GPU" + (f"; {p.knobs}" if p.knobs else ""),
                        p.server_timeout_s, run_client, echo)


def launch_sweep(gpus: int | None, model: str | None, revision: str | None, served_model_name: str | None,
                 server: str, max_num_seqs: int | None, port0: int | None, logs: str, item_paths: Sequence[str],
                 results: str, store: str | None, bench: str | None, limit: int | None, columns: str | None,
                 conds: str | None, pilot: bool, echo: Callable[[str], None],
                 settings: SweepKnobs | None = None, max_model_len: int | None = None, plan_only: bool = False,
                 server_timeout_s: float = 900.0) -> int:
    """The body of ``benchcheck launch --sweep`` (exit 2 with a message on a precondition failure).
    ``plan_only``: the client's dry run (``sweep dry-run`` on the same arguments), no server started."""
    from benchcheck.launch.cli_run import served_name
    from benchcheck.sweep.conditions import SWEEP_MODEL

    if not store:
        echo("error: --sweep needs --store (the normalized videos)")
        return 2
    name = model or SWEEP_MODEL.name
    rev = revision if model else (revision or SWEEP_MODEL.revision)
    args: list[str] = []
    for p in item_paths:
        args += ["--items", p]
    args += ["--store", store, "--results", results, "--logs", logs]  # runner.log beside launch_params.txt
    for flag, value in (("--bench", bench), ("--limit", limit), ("--columns", columns), ("--conds", conds)):
        if value is not None:
            args += [flag, str(value)]
    if pilot:
        args.append("--pilot")
    if plan_only:  # the client's plan, under the spec it would run (its model and revision)
        python = settings.python if settings else sys.executable
        ident = ["--model", served_name(name, served_model_name), *(["--revision", rev] if rev else [])]
        return subprocess.run([python, "-m", "benchcheck", "sweep", "dry-run", *ident, *args], check=False).returncode
    try:
        plan = plan_sweep_launch(gpus, name, served_name(name, served_model_name), rev, server, max_num_seqs, args,
                                 Path(logs), SWEEP_PORT0 if port0 is None else port0, settings,
                                 {"pilot": int(pilot), "bench": bench, "conds": conds}, max_model_len,
                                 server_timeout_s)
        return run_sweep_launch(plan, echo)
    except (ValueError, RuntimeError) as e:
        echo(f"error: {e}")
        return 2
