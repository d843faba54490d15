"""A wrong ``--ray-address`` fails in seconds with one line (exit 2), not after Ray's GCS timeout."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchcheck.executors.ray_cluster import RayUnavailable, check_reachable


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (not a GCS)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def test_closed_port_fails_at_once() -> None:
    port = _closed_port()
    t0 = time.monotonic()
    with pytest.raises(RayUnavailable, match=f"nothing answers at 127.0.0.1:{port}.*ray start --head"):
        check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 2


def test_a_port_that_is_no_gcs_fails_within_the_deadline(silent_port: int) -> None:
    pytest.importorskip("grpc")
    t0 = time.monotonic()
    with pytest.raises(RayUnavailable, match="answers but is not a Ray head's GCS port"):
        check_reachable(f"127.0.0.1:{silent_port}", timeout_s=1.0)
    assert time.monotonic() - t0 < 5


def test_not_an_address() -> None:
    with pytest.raises(RayUnavailable, match="not auto or HOST:PORT"):
        check_reachable("head-node")


def test_cli_wrong_address_is_one_line_exit_2(pool: tuple[Path, Path]) -> None:
    pytest.importorskip("ray")
    items, frames = pool
    port = _closed_port()
    t0 = time.monotonic()
    for argv in (["sweep", "run", "--items", str(items), "--store", str(frames.parent / "store"), "--conds",
                  "v_blind", "--engine", "scripted", "--results", str(frames.parent / "sweep_results")],
                 ["screen", "--items", str(items), "--step", "1", "--engine", "scripted",
                  "--results", str(frames.parent / "screen_results")]):
        res = subprocess.run([sys.executable, "-m", "benchcheck", *argv, "--no-progress", "--executor", "ray",
                              "--ray-address", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120)
        assert res.returncode == 2, res.stderr
        err = [line for line in res.stderr.splitlines() if line.strip()]
        assert err[-1].startswith("error: --ray-address 127.0.0.1:") and "nothing answers" in err[-1], res.stderr
        assert "Traceback" not in res.stderr
    assert time.monotonic() - t0 < 60  # two CLI starts with Ray imported; Ray's own timeout is minutes
