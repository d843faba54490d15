"""Ray's CPU actors decode untrusted video files and need no key: their environment loses the
secret-named variables and the engine's ``--api-key-env`` variable, whatever its name, while the
engine actors keep it (they read the key there). Before, the CPU actors of `sweep run --executor
ray` and of `screen --executor ray` held every variable the driver had."""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Sequence
from typing import Any

from ray_helpers import RAY_INHERITED as NAMES

from benchcheck.executors.ray_cluster import ENGINE_SLOT, placement_for
from benchcheck.executors.ray_pipeline import Stages, WorkRow, run_pipeline
from benchcheck.executors.ray_screen import EngineRecipe
from benchcheck.executors.ray_sweep import SweepRecipe
from benchcheck.executors.ray_units import PrepareStage
from benchcheck.sweep.engine import SweepEngine


class _EnvAdapter:
    """A task adapter whose ``build`` reports which of ``NAMES`` its process still has."""

    async def build(self, payloads: Sequence[Any]) -> list[Any]:
        return [{n: n in os.environ for n in NAMES} for _ in payloads]


class _EngineSide:
    """The engine stage: adds which of ``NAMES`` the engine actor's process has."""

    def __call__(self, payloads: Sequence[bytes]) -> list[bytes]:
        return [pickle.dumps((pickle.loads(p), {n: n in os.environ for n in NAMES})) for p in payloads]


def _engine_side() -> _EngineSide:
    return _EngineSide()


def test_cpu_actors_lose_the_key_variable_and_engine_actors_keep_it(ray_local: str) -> None:
    """``ray_local``'s Ray started with ``NAMES`` set: its workers inherit them."""
    import ray.cloudpickle

    # Ray's workers cannot import this test module: its classes travel by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        stages = Stages(PrepareStage(_EnvAdapter(), ("BC_CHOSEN_NAME",)), _engine_side, prepare_batch=1)
        rows = [WorkRow("u", str(k), pickle.dumps(k)) for k in range(3)]
        got: list[tuple[str, str, bytes]] = []
        run_pipeline(rows, stages, placement_for({"CPU": 2.0, ENGINE_SLOT: 1.0}), got.extend)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert len(got) == 3
    for _, _, payload in got:
        cpu, engine = pickle.loads(payload)
        assert cpu == {"BC_CHOSEN_NAME": False, "BC_TEST_API_KEY": False, "BC_PLAIN": True}
        assert engine == dict.fromkeys(NAMES, True)


def test_both_recipes_name_their_key_variable_for_the_cpu_actors() -> None:
    """``run_units`` drops in its CPU actors the variable the recipe's engine reads its key from."""
    from benchcheck.engines.options import EngineOptions

    assert SweepRecipe(SweepEngine("openai", api_key_env="MY_GATEWAY")).key_variable == "MY_GATEWAY"
    assert SweepRecipe(SweepEngine("reference")).key_variable is None
    assert EngineRecipe("openai", 1, EngineOptions(), "MY_GATEWAY").key_variable == "MY_GATEWAY"
