"""Loopback helpers shared by the test areas: free ports and an aiohttp app served from a thread."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def thread_server(app: web.Application) -> Iterator[str]:
    """Run an aiohttp app on a free loopback port in a background thread; yields the base URL."""
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert started.wait(30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(30)


def wait_health(url: str, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = 120.0) -> None:
    """Block until ``url``/health answers 200; fail at once if ``proc`` (the server) exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} not healthy after {timeout_s} s")


@contextmanager
def serve_cli(*args: str) -> Iterator[str]:
    """``benchcheck serve ARGS --port <free>`` in its own process group; yields the base URL."""
    port = free_port()
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", *args, "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_health(url, proc)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
