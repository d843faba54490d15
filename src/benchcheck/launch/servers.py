"""One inference server per GPU: command lines (pure), start, wait until healthy, stop.

`vllm serve` with the protocol's arguments (docs/PROTOCOL.md, "Launcher") when vLLM is installed,
otherwise `benchcheck serve` (which speaks the same API subset); on a machine without GPUs, N CPU servers.

A server gets the environment minus the judge's and every secret-named variable
(:func:`benchcheck.masking.child_environment`), except the Hub token it may need to download a
gated model (:data:`SERVER_SECRETS`): the servers listen on loopback without a key and their
clients send none, so a ``BENCHCHECK_API_KEY`` or ``VLLM_API_KEY`` of the user's shell would only
make every request a 401, and other keys (the judge's, an OpenAI key) are none of theirs.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchcheck.defaults import GPU_UTIL, STEP_MAX_SEQS, STEP_PORT0
from benchcheck.direct_http import open_direct
from benchcheck.masking import child_environment

SERVER_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")  # the Hub token: a gated model's download

# ``--port0 auto``: no port is chosen before a server starts. ``benchcheck serve`` binds port 0 and
# logs the port the kernel gave it; an engine that cannot report its port (vLLM logs the port it
# was asked for) gets a port the launcher holds bound until the server listens on it.
AUTO_PORT = 0

# The variable by which the launcher gives each `benchcheck serve` it starts a tag of its own, which
# the server writes on its "serving" line. Two launches of a step with one --logs folder append to
# the same server log, so a line is known to be this server's only by the tag; the environment
# reaches the server through a wrapper (`sh -c`, a --python script) where a pid would not.
SERVE_TAG_ENV = "BENCHCHECK_SERVE_TAG"


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """How one server is started and where it answers."""

    index: int
    port: int  # AUTO_PORT until the server's port is known
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    # The server logs the port once it listens there (`benchcheck serve`): with ``--port 0`` that is
    # how the launcher learns the port, and on a fixed port it is how the launcher tells its own
    # server from another launch's that got the port first (both had found it free).
    reports_port: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def at_port(self, port: int) -> ServerSpec:
        """This server on ``port``: its ``--port`` argument too, so the recorded line is the one that ran."""
        argv = list(self.argv)
        if "--port" in argv[:-1]:
            argv[argv.index("--port") + 1] = str(port)
        return replace(self, port=port, argv=tuple(argv))

    def line(self) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (prefix + " " if prefix else "") + shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    model: str
    served_name: str
    revision: str | None
    port0: int = STEP_PORT0
    gpu_util: float = GPU_UTIL
    max_num_seqs: int = STEP_MAX_SEQS
    max_model_len: int | None = None
    use_vllm: bool = False
    device: str = "auto"
    python: str = sys.executable  # PY: the interpreter of `benchcheck serve` servers and the clients
    vllm: str = "vllm"  # VLLM: the vLLM command


def vllm_available(vllm: str = "vllm") -> bool:
    return shutil.which(vllm) is not None


def visible_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The GPU ids servers may use: ``CUDA_VISIBLE_DEVICES`` when set (a Slurm allocation, or the
    user's choice), else every GPU nvidia-smi lists; torch is not imported for this."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(gpu_count())]


def gpu_count() -> int:
    """GPUs seen by nvidia-smi (0 without a driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


MAX_PORT = 65535
# The ports below are privileged (binding one takes root): a --port0 an error suggests never starts there.
LOWEST_PORT = 1024


def port0_advice(n: int, others: Sequence[str] = ()) -> str:
    """What an error line says to a fixed ``--port0`` whose ``n`` ports would pass ``MAX_PORT``:
    ``; use ...`` with the highest first port under which they fit, never one below ``LOWEST_PORT``
    (and that none fits, when none from there does), ``others`` (other ways), and ``--port0 auto``. Pure."""
    highest = MAX_PORT - n + 1
    ways = [f"--port0 {highest}" + ("" if highest == LOWEST_PORT else f" or lower (not below {LOWEST_PORT})")]
    none = ""
    if highest < LOWEST_PORT:
        ways = []
        none = (f"; no --port0 fits {n} ports above the privileged ones ({LOWEST_PORT}-{MAX_PORT} holds "
                f"{MAX_PORT - LOWEST_PORT + 1})")
    ways += [*others, "--port0 auto"]
    return f"{none}; use " + (", ".join(ways[:-1]) + ", or " + ways[-1] if len(ways) > 1 else ways[0])


def server_ports(port0: int, n: int) -> list[int]:
    """The ports of a host's ``n`` servers: ``port0 + i`` (``AUTO_PORT`` for each with ``--port0
    auto``). Refused (``ValueError``) when the last one is past the highest TCP port: the launcher
    would otherwise fail with a traceback from ``bind`` after it had started the servers below it. Pure."""
    if port0 == AUTO_PORT:
        return [AUTO_PORT] * n
    if port0 + n - 1 > MAX_PORT:
        raise ValueError(f"--port0 {port0} with {n} servers needs ports up to {port0 + n - 1}, past {MAX_PORT}"
                         + port0_advice(n))
    return [port0 + i for i in range(n)]


def port0_shown(port0: int) -> str:
    """``--port0`` as the user gives it: ``auto``, or the first port (pure)."""
    return "auto" if port0 == AUTO_PORT else str(port0)


def server_specs(n: int, opts: ServerOptions, gpus: Sequence[str]) -> list[ServerSpec]:
    """The server command lines of a host: server i on GPU ``gpus[i]`` (N CPU servers when
    ``gpus`` is empty). Pure."""
    if gpus and n > len(gpus):
        raise ValueError(f"{n} servers asked for but only {len(gpus)} GPUs are visible ({','.join(gpus)})")
    has_gpus = bool(gpus)
    specs = []
    for i, port in enumerate(server_ports(opts.port0, n)):
        env = {"CUDA_VISIBLE_DEVICES": gpus[i]} if has_gpus else {}
        if opts.use_vllm:
            argv = [opts.vllm, "serve", opts.model, "--served-model-name", opts.served_name, "--host", "127.0.0.1",
                    "--port", str(port), "--gpu-memory-utilization", str(opts.gpu_util),
                    "--max-num-seqs", str(opts.max_num_seqs), "--max-logprobs", "20"]
            if opts.revision:
                argv += ["--revision", opts.revision]
            if opts.max_model_len:
                argv += ["--max-model-len", str(opts.max_model_len)]
        else:
            argv = [opts.python, "-m", "benchcheck", "serve", "--model", opts.model, "--served-model-name",
                    opts.served_name, "--host", "127.0.0.1", "--port", str(port),
                    "--max-batch-size", str(opts.max_num_seqs), "--device", "cuda" if has_gpus else "cpu"]
            if opts.revision:
                argv += ["--revision", opts.revision]
        specs.append(ServerSpec(i, port, tuple(argv), env, reports_port=not opts.use_vllm))
    return specs


@dataclass(slots=True)
class Running:
    spec: ServerSpec  # its port filled in once the server has told it (``reports_port``)
    proc: subprocess.Popen[bytes]
    log: Path
    log_start: int = 0  # the log's size before this server wrote to it: earlier runs' lines come before
    held: socket.socket | None = None  # the port reserved for a server that cannot report its own
    tag: str = ""  # what this server's "serving" line ends with (``reports_port``): SERVE_TAG_ENV

    def release(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now. Bound with ``SO_REUSEADDR``, as servers
    (vLLM's uvicorn, ``benchcheck serve``'s aiohttp) bind: a port whose last server has just
    stopped sits in TIME_WAIT for about a minute and is free to them; a port with a listener is not."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def server_environment(env: Mapping[str, str], spec: ServerSpec) -> dict[str, str]:
    """A server's environment (the module's rule): ``env`` without secrets but the Hub token, plus
    the spec's own variables. Pure."""
    return {**child_environment(env, keep=SERVER_SECRETS), **spec.env}


def reserve_port(host: str) -> socket.socket:
    """A socket bound to a port the kernel picked, not listening, with ``SO_REUSEADDR``. While it is
    open no other ``bind`` to port 0 and no outgoing connection gets that port, and a plain
    ``bind`` is refused; a server that binds with ``SO_REUSEADDR`` (vLLM, uvicorn, ``benchcheck
    serve``) can still listen on it. A port checked free and closed again could be taken, by an
    outgoing connection in the ephemeral range or another launch, before the server binds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
    except OSError:
        s.close()
        raise
    return s


def start(spec: ServerSpec, log: Path) -> Running:
    """Start a server in its own process group, its output to ``log``. Refuses a port that is
    taken: the health check would otherwise find someone else's server there. With ``AUTO_PORT``
    the server binds port 0 itself (``reports_port``) or gets a port reserved for it. A server that
    reports its port gets a tag of its own (:data:`SERVE_TAG_ENV`) to write on that line."""
    held = None
    env = server_environment(os.environ, spec)
    tag = secrets.token_hex(8) if spec.reports_port else ""
    if tag:
        env[SERVE_TAG_ENV] = tag
    if spec.port == AUTO_PORT and not spec.reports_port:
        try:
            held = reserve_port(spec.host)
        except OSError as e:
            raise RuntimeError(f"server {spec.index}: no free port on {spec.host} ({e.strerror or e})") from None
        spec = spec.at_port(held.getsockname()[1])
    elif spec.port != AUTO_PORT and not port_free(spec.host, spec.port):
        raise RuntimeError(f"port {spec.port} is already in use; choose another --port0, or --port0 auto")
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as f:
            log_start = f.tell()
            proc = subprocess.Popen(spec.argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    except BaseException:
        if held is not None:
            held.close()
        raise
    return Running(spec, proc, log, log_start, held, tag)


def logged_port(log: Path, start: int, host: str, tag: str) -> int | None:
    """The port the ``benchcheck serve`` given ``tag`` announced in ``log`` past byte ``start``
    ("serving ... on http://HOST:PORT/v1, ...; launch tag TAG" once its socket listens), or None
    before that line is written: another server's line is not this one's, though it is in the same
    log (another launch's, given the same log folder). The last address on the line: the served
    model's name comes before it and may hold any text."""
    if not tag:
        raise ValueError("a server's line is told by its tag; none given")
    text = _log_since(log, start)
    line = rf"^.* serving .* \(engine .* on http://{re.escape(host)}:(\d+)/v1, .*; launch tag {re.escape(tag)}$"
    m = re.search(line, text, re.M)
    return int(m.group(1)) if m else None


def untagged_serving(log: Path, start: int) -> bool:
    """Whether ``log`` past ``start`` holds a "serving" line without any launch tag: the server
    listens, but ``logged_port`` can never take it for the one launched (said when it times out)."""
    lines = _log_since(log, start).splitlines()
    return any(" serving " in ln and "/v1, " in ln and "; launch tag " not in ln for ln in lines)


def _log_since(log: Path, start: int) -> str:
    """What ``log`` holds past byte ``start`` (empty while it cannot be read: not written yet)."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def healthy(url: str, timeout: float = 2.0) -> bool:
    base = url[: -len("/v1")] if url.endswith("/v1") else url
    try:
        with open_direct(f"{base}/health", timeout=timeout) as r:
            return bool(r.status == 200)
    # HTTPException: not an HTTP server yet. A poll of a port in the ephemeral range before the
    # server listens can connect to itself (TCP simultaneous open) and read its own request back.
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return False


def listener_pids(port: int) -> set[int] | None:
    """The processes holding a listening TCP socket on ``port`` (any address), among those whose
    open files this user may read (Linux ``/proc``); None where ``/proc/net/tcp`` cannot be read."""
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    if not readable:
        return None
    pids = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                pids.add(int(fd_dir.parent.name))
        except (OSError, ValueError):
            continue  # another user's process, or one that has just exited
    return pids


def foreign_listener(r: Running) -> int | None:
    """A process that is neither server ``r``'s nor one of its descendants and listens on its port
    (its pid), or None when the listener is this server's or cannot be told. For a server that
    cannot report its port (vLLM on a fixed port). Not seen: another user's listener (its open
    files cannot be read), and any without Linux ``/proc``."""
    pids = listener_pids(r.spec.port)
    if not pids:
        return None
    return None if any(descends_from(pid, r.proc.pid) for pid in pids) else min(pids)


def descends_from(pid: int, root: int) -> bool:
    """Whether process ``pid`` is ``root`` or one of its descendants (Linux ``/proc``)."""
    seen = set()
    while pid > 1 and pid not in seen:
        if pid == root:
            return True
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid: after the name, which may hold ")"
    return False


def not_ours(r: Running, why: str) -> RuntimeError:
    """The one-line error of a server whose port answers for another process."""
    return RuntimeError(f"server {r.spec.index}: port {r.spec.port} is served by another process, not this "
                        f"launch's server ({why}; see {r.log}); it was taken after this launch found it free: "
                        "choose another --port0, or --port0 auto")


def wait_healthy(servers: Sequence[Running], timeout_s: float) -> None:
    """Block until every server answers /health; raise naming the server (and its log) that did not.
    A server that reports its port is asked only once its log says it listens (``Running.spec``
    then holds the port): before that, whatever answers on a fixed port is someone else's. A server
    that cannot report its port counts only while its process lives and no other process is seen
    listening on the port."""
    deadline = time.monotonic() + timeout_s
    waiting = list(servers)
    while waiting:
        for r in list(waiting):
            if r.proc.poll() is not None:
                port = r.spec.port if r.spec.port != AUTO_PORT else "auto"
                if r.spec.port != AUTO_PORT and r.held is None and not port_free(r.spec.host, r.spec.port):
                    raise not_ours(r, f"which exited with {r.proc.returncode}")
                raise RuntimeError(f"server {r.spec.index} (port {port}) exited with {r.proc.returncode} "
                                   f"before it was healthy; see {r.log}")
            if r.spec.reports_port:
                bound = logged_port(r.log, r.log_start, r.spec.host, r.tag)
                if bound is None:
                    continue
                if r.spec.port == AUTO_PORT:
                    r.spec = replace(r.spec, port=bound)
                elif bound != r.spec.port:
                    raise RuntimeError(f"server {r.spec.index} was given port {r.spec.port} but listens on {bound}; "
                                       f"see {r.log}")
            if healthy(r.spec.url) and r.proc.poll() is None:  # ours answers, not a stranger's
                if not r.spec.reports_port and r.held is None and (pid := foreign_listener(r)) is not None:
                    raise not_ours(r, f"pid {pid} listens there")
                waiting.remove(r)
        if waiting and time.monotonic() > deadline:
            silent = [r.spec.index for r in waiting
                      if r.spec.reports_port and logged_port(r.log, r.log_start, r.spec.host, r.tag) is None]
            why = f" ({len(silent)} never logged that they listen)" if silent else ""
            untagged = [r.spec.index for r in waiting
                        if r.spec.index in silent and untagged_serving(r.log, r.log_start)]
            if untagged:
                why = (f" ({len(silent)} never logged that they listen; {untagged} logged 'serving' without this "
                       f"launch's tag: a benchcheck older than {SERVE_TAG_ENV}, or a wrapper that clears the "
                       "environment)")
            raise RuntimeError(f"servers {[r.spec.index for r in waiting]} not healthy after {timeout_s:.0f}s{why}; "
                               f"see {waiting[0].log}")
        if waiting:
            time.sleep(0.25)


def stop(procs: Sequence[subprocess.Popen[bytes]], grace_s: float = 10.0) -> None:
    """SIGTERM each process group, then SIGKILL what is left after ``grace_s``."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
