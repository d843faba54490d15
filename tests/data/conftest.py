"""Fixtures of the data tests: a loopback Hub, an isolated HF_HOME, a small frame cache."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from data_helpers import FakeHub, HubHandler, make_frame_cache


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    """A running loopback hub; ``fake_hub.url`` is its endpoint (pass it as HF_ENDPOINT)."""
    hub = FakeHub()
    handler = type("Handler", (HubHandler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _isolated_hf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No real token, cache or network: every test gets its own HF_HOME and offline telemetry."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture
def frame_cache(tmp_path: Path) -> Path:
    """Seven videos of three tiny JPEG frames each."""
    return make_frame_cache(tmp_path / "src" / "pool_frames", 7)
