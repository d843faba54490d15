"""The one server lifecycle of every launch: start, wait until healthy, record, run the clients, stop.

`launch` (screening) and `launch --sweep` differ only in their servers' command lines and in
what runs once the servers answer; both go through `with_servers`, so Ctrl-C/SIGTERM handling,
the health wait and the `launch_params.txt` rule live here once.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from benchcheck.launch.servers import Running, ServerSpec, start, stop, wait_healthy


def write_launch_params(logs: Path, specs: Sequence[ServerSpec], note: str = "") -> Path:
    """Append the exact command lines of servers that started and got healthy (what `pack` reports)."""
    path = logs / "launch_params.txt"
    logs.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {note}\n")
        for s in specs:
            f.write(s.line() + "\n")
    return path


def ports_note(specs: Sequence[ServerSpec]) -> str:
    """``ports 8001 8002``: where the servers answered, in server order (pure)."""
    return "ports " + " ".join(str(s.port) for s in specs)


def with_servers(specs: Sequence[ServerSpec], log_of: Callable[[ServerSpec], Path], logs: Path, note: str,
                 timeout_s: float, clients: Callable[[list[subprocess.Popen[bytes]], list[ServerSpec]], int],
                 echo: Callable[[str], None]) -> int:
    """Start ``specs`` (server i logs to ``log_of(spec)``), wait until all are healthy, append their
    lines and ports to ``logs/launch_params.txt``, then return ``clients(started, serving)``:
    ``serving`` are the specs at the ports the servers answer on (``--port0 auto`` learns them only
    now), and the body appends every process it starts to ``started`` so that an interrupt or an
    error stops them with the servers. Ctrl-C or SIGTERM gives 130; a server that never gets
    healthy raises RuntimeError."""
    started: list[subprocess.Popen[bytes]] = []
    servers: list[Running] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_signal)
    try:
        for s in specs:
            r = start(s, log_of(s))
            servers.append(r)
            started.append(r.proc)
            echo(f"server {s.index}: {r.spec.line()}")
        wait_healthy(servers, timeout_s)
        serving = [r.spec for r in servers]
        # Only now: a refused port or a server that never got healthy served nothing, and `pack`
        # reports these lines as the servers that ran.
        write_launch_params(logs, serving, f"{note}; {ports_note(serving)}" if note else ports_note(serving))
        echo(f"{len(servers)} servers healthy on {ports_note(serving)}")
        return clients(started, serving)
    except KeyboardInterrupt:
        echo("interrupted: stopping servers and clients")
        return 130
    finally:
        stop(started)
        for r in servers:
            r.release()
        signal.signal(signal.SIGTERM, old)
