"""Shared fixtures. Slow tests run only with BENCHCHECK_SLOW=1; GPU tests only with CUDA."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = os.environ.get("BENCHCHECK_SLOW") == "1"
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    for item in items:
        if "slow" in item.keywords and not slow:
            item.add_marker(pytest.mark.skip(reason="slow: set BENCHCHECK_SLOW=1"))
        if "gpu" in item.keywords and not cuda:
            item.add_marker(pytest.mark.skip(reason="gpu: no CUDA device"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> object:
    """A tiny random-weight Qwen3-VL checkpoint folder, built once per test session (seed 0)."""
    from benchcheck.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3-vl", seed=0)
