"""Ray tests share one Ray per module (start-up is slow on 2 cores); an ``engine_slot`` stands in for a GPU."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import hypothesis  # noqa: F401  (imported before Ray runs: see below)
import pytest

sys.path.insert(0, str(Path(__file__).parent))
# hypothesis's pytest plugin imports hypothesis lazily at the terminal summary; after a Ray session
# in this process, CPython 3.11's ``ast.parse`` of its modules (assertion rewriting) fails with
# "AST constructor recursion depth mismatch", failing a run of tests/ray alone. Importing it first
# avoids that.


@pytest.fixture(scope="session")
def ray_local() -> Iterator[str]:
    """A local Ray with 2 CPUs and one engine slot, shared by the screen and sweep tests (the
    cluster tests' modules run first and shut theirs down); yields its address (for other drivers)."""
    ray = pytest.importorskip("ray")
    # Variables Ray's workers inherit from the driver that started it (test_ray_secrets): set while
    # Ray starts, gone from this process after.
    from ray_helpers import RAY_INHERITED

    inherited = {name: "sk-" + "x" * 20 for name in RAY_INHERITED}
    os.environ.update(inherited)
    try:
        ctx = ray.init(num_cpus=2, resources={"engine_slot": 1}, log_to_driver=False)
    finally:
        for name in inherited:
            os.environ.pop(name, None)
    yield str(ctx.address_info["address"])
    ray.shutdown()


@pytest.fixture(scope="session")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from ray_helpers import make_pool

    return make_pool(tmp_path_factory.mktemp("raypool"))


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """The ground-truth demo's benchmarks and their normalized store: (item files, store)."""
    from benchcheck.demo.run import prepare_benchmarks

    root = tmp_path_factory.mktemp("raydemo")
    bundle = prepare_benchmarks(root)
    return list(bundle.paths), root / "store"
