"""Connect to (or start) a Ray cluster, size the stages from its resources, watch its object store.

Ray is an optional extra (``pip install 'benchcheck[ray]'``); this module imports it lazily so
that the rest of the program never needs it.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from benchcheck.errors import first_line

A = TypeVar("A")
R = TypeVar("R")

# The logical resource an engine actor asks for on a cluster without GPUs (tests, CPU-only engines).
ENGINE_SLOT = "engine_slot"


class RayUnavailable(ValueError):
    """Ray is not installed or the cluster cannot host an engine: a one-line usage error."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--executor ray needs Ray: pip install 'benchcheck[ray]'") from None
    return ray


@dataclass(frozen=True, slots=True)
class Placement:
    """How many actors each stage gets and what an engine actor asks for."""

    cpu_actors: int
    engine_actors: int
    engine_remote_args: tuple[tuple[str, Any], ...]  # num_gpus=1, or resources={"engine_slot": 1}
    dashboard_url: str | None = None

    def engine_args(self) -> dict[str, Any]:
        return dict(self.engine_remote_args)


def placement_for(resources: dict[str, float], dashboard_url: str | None = None) -> Placement:
    """One engine actor per GPU across all nodes, else per ``engine_slot``; CPU actors on the CPUs
    left after one for Ray Data's own read tasks (pure: tested without Ray)."""
    gpus = int(resources.get("GPU", 0))
    slots = int(resources.get(ENGINE_SLOT, 0))
    args: tuple[tuple[str, Any], ...]
    if gpus:
        engine, args = gpus, (("num_gpus", 1), ("num_cpus", 0))
    elif slots:
        engine, args = slots, (("resources", {ENGINE_SLOT: 1}), ("num_cpus", 0))
    else:
        raise RayUnavailable(f"the Ray cluster has no GPU and no {ENGINE_SLOT!r} resource: start its nodes with "
                             f"ray start --resources '{{\"{ENGINE_SLOT}\": 1}}' to run an engine without a GPU")
    cpus = int(resources.get("CPU", 1))
    return Placement(max(1, cpus - 1), engine, args, dashboard_url)


def connect(address: str | None) -> Placement:
    """``address`` None: the Ray already initialised in this process, else a local one with this
    machine's CPUs and GPUs (one ``engine_slot`` when it has no GPU); ``auto`` or HOST:PORT: join it."""
    ray = import_ray()
    if not ray.is_initialized():
        if address:
            check_reachable(address)
            try:
                ctx = ray.init(address=address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise RayUnavailable(f"--ray-address {address}: cannot join the Ray cluster: "
                                     f"{str(e).splitlines()[0][:200]}") from None
        else:
            gpus = _local_gpus()
            ctx = ray.init(num_cpus=os.cpu_count() or 1, num_gpus=gpus,
                           resources={} if gpus else {ENGINE_SLOT: 1}, log_to_driver=False)
        url = getattr(ctx, "dashboard_url", None) or None
    else:
        url = None
    return placement_for(ray.cluster_resources(), f"http://{url}" if url and "://" not in url else url)


def connect_announced(address: str | None, echo: Callable[[str], None]) -> Placement:
    """``connect``, then the dashboard's URL on the console when the cluster has one."""
    placement = connect(address)
    if placement.dashboard_url:
        echo(f"Ray dashboard: {placement.dashboard_url}")
    return placement


def cluster_failed(what: str, e: BaseException) -> str:
    """The one line for a cluster that failed under a run (actors that cannot be placed, a lost
    head): rows written so far are whole and the leases go with this process, so rerunning continues."""
    return (f"{what} (ray): the Ray cluster failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}; "
            "run the same command again to continue")


def on_engine_resource(fn: Callable[[A], R], arg: A, placement: Placement) -> R:
    """``fn(arg)`` as one task where an engine actor would run (before the pipeline: the engine's
    identity and facts). A usage error there (a bad model folder, a refused option) comes back as
    a ``ValueError`` with its own one-line message: the exception itself never crosses Ray (not
    every exception class can be rebuilt on the driver), only its message does."""
    ray = import_ray()
    task = ray.remote(_guarded).options(**placement.engine_args())
    ok, value = ray.get(task.remote(fn, arg))
    if not ok:
        raise ValueError(value)
    return cast(R, value)


def _guarded(fn: Callable[[A], R], arg: A) -> tuple[bool, R | str]:
    try:
        return True, fn(arg)
    except ValueError as e:
        return False, first_line(e) or type(e).__name__


def _current_cluster() -> str | None:
    """The address ``ray start`` left for ``auto`` on this node (Ray's own file), if any."""
    try:
        text = Path(tempfile.gettempdir(), "ray", "ray_current_cluster").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text.splitlines()[0].strip() if text else None


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail in seconds when nothing listens at the cluster's GCS port: ``ray.init`` would otherwise
    wait out Ray's GCS connection timeout (minutes) before saying so. ``auto`` is checked against
    the address it resolves to (``RAY_ADDRESS``, else the node's ``ray start`` file); with neither,
    ``ray.init`` says at once that no cluster runs. Ray Client (``ray://``) addresses are left to Ray."""
    target = os.environ.get("RAY_ADDRESS") or _current_cluster() if address == "auto" else address
    if not target or target == "auto" or "://" in target:
        return
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailable(f"--ray-address {address}: not auto or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise RayUnavailable(f"--ray-address {address}: nothing answers at {host}:{port} ({why}); is the head "
                             f"started (ray start --head --port {port})? Check with: ray status --address "
                             f"{host}:{port}") from None
    problem = _gcs_problem(target, timeout_s)
    if problem:
        raise RayUnavailable(f"--ray-address {address}: {host}:{port} answers but is not a Ray head's GCS port "
                             f"({problem}); give the port of ray start --head --port (default 6379)")


# The cheapest GCS call there is (an empty request); a port that is not a GCS (an HTTP server, a
# proxy that accepts every connection, another gRPC service) fails it within the deadline.
_GCS_PING = "/ray.rpc.NodeInfoGcsService/GetClusterId"


def _gcs_problem(target: str, timeout_s: float) -> str | None:
    try:
        import grpc
    except ImportError:  # grpcio comes with the extra; without it the TCP check is all there is
        return None
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(_GCS_PING, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            call(b"", timeout=timeout_s)
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else None
            return f"gRPC {getattr(code, 'name', code)}"
    return None


def _local_gpus() -> int:
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:  # no torch, or a broken CUDA: this machine has no usable GPU
        return 0


_PLASMA = re.compile(r"Plasma memory usage (\d+) MiB")


def object_store_used_mib() -> int | None:
    """Object-store memory in use across the cluster now, in MiB (None when Ray cannot say)."""
    try:
        from ray._private.internal_api import memory_summary

        m = _PLASMA.search(memory_summary(stats_only=True))  # type: ignore[no-untyped-call]
    except Exception:  # a private API: never let it fail a run
        return None
    return int(m.group(1)) if m else None


class MemoryPeak:
    """Samples the object store's use in a thread while the pipeline runs; ``peak_mib`` at the end."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.peak_mib: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="object-store-peak", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            used = object_store_used_mib()
            if used is not None:
                self.peak_mib = max(self.peak_mib or 0, used)
            self._stop.wait(self.every_s)

    def __enter__(self) -> MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
