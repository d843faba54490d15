"""benchmarks/gpu_pool.py: the funnel's sizes, the projection's arithmetic, and a run split over
two calls that hands the first call's survivors to the second exactly as one call would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from benchcheck.screen.steps import STEPS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _forget_module() -> Iterator[None]:
    """The smoke test runs the script as ``__main__``; runpy warns when the module is already
    imported, so each test here leaves it out of sys.modules."""
    yield
    sys.modules.pop("benchmarks.gpu_pool", None)


def gpu_pool() -> ModuleType:
    import benchmarks.gpu_pool

    return benchmarks.gpu_pool


def planned_rates() -> dict[int, float]:
    return dict(zip(STEPS, map(float, gpu_pool().H200_RATES.split(",")), strict=True))


@pytest.mark.parametrize("screen_s", [60.0, 600.0, 1800.0])
def test_funnel_screens_the_time_asked_in_nested_prefixes(screen_s: float) -> None:
    gp, rates = gpu_pool(), planned_rates()
    benches = gp.BENCHES
    limits = gp.funnel(gp.default_items(rates, screen_s), rates)
    assert all(limits[k] <= limits[k - 1] for k in range(2, 7))
    planned = sum(limits[k] * benches / rates[k] for k in STEPS)
    assert screen_s <= planned <= screen_s * 1.02 + 6 * benches / min(rates.values())
    # steps screen about equally long, but for step 4, fed by step 3's slower rate
    times = [limits[k] * benches / rates[k] for k in (1, 3, 5, 6)]
    assert max(times) < 1.1 * min(times) + benches / rates[6]


def test_projection_items_and_time() -> None:
    """mid: step 1 removes 40 %, each later step 10 %; half the items have frames."""
    gp, rates = gpu_pool(), planned_rates()
    measured = {3: {"steady_items_per_s": 10.0, "first_row_s": 30.0}, 6: {"steady_items_per_s": float("nan")}}
    p = gp.project(measured, rates, "mid", 0.5, 2)
    a = gp.ORIGIN_ITEMS * 0.5 * 0.6  # with frames, after step 1; the same number without frames
    want = {1: gp.ORIGIN_ITEMS, 2: a, 3: a * 0.9, 4: a * 0.81 + a, 5: a * 0.81 * 0.9, 6: a * 0.81 * 0.81}
    assert p["items"] == pytest.approx(want)
    used = {**rates, 3: 10.0}  # a step's nan rate falls back to its planned one
    secs = {k: want[k] / 2 / used[k] + (30.0 if k == 3 else 0.0) for k in STEPS}
    assert p["seconds"] == pytest.approx(secs)
    assert p["total_s"] == pytest.approx(sum(secs.values()))


def ids(folder: Path, status: str | None = None) -> set[str]:
    rows = [json.loads(line) for f in folder.glob("*.jsonl") for line in f.read_text().splitlines() if line.strip()]
    return {r["item_id"] for r in rows if status is None or r.get("removed") is (status == "removed")}


@pytest.mark.slow
def test_two_calls_carry_the_survivors(tmp_path: Path) -> None:
    path = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}

    def call(*args: str) -> dict[str, object]:
        out = tmp_path / args[1].replace(",", "")
        proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_pool", "--tiny", *args, "--out", str(out)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        record: dict[str, object] = json.loads((out / "gpu_pool.json").read_text())
        return record

    first = call("--steps", "1,2,3", "--items", "36", "--work", str(tmp_path / "a"))
    assert first["packed_rows"]  # the rows of the prefix that steps 4-6 read
    # A fresh work folder: as on a new machine, only the first call's files go on.
    second = call("--steps", "4,5,6", "--work", str(tmp_path / "b"), "--resume-from", str(tmp_path / "123"))
    steps = second["steps"]
    assert isinstance(steps, dict) and sorted(steps) == ["1", "2", "3", "4", "5", "6"]
    res = tmp_path / "b" / "results"
    # step 4 ran on exactly the items step 3 kept (step 3's prefix equals step 4's)
    assert ids(res / "step4") == ids(res / "step3", "kept")
    assert ids(res / "step5") == ids(res / "step4", "kept")
    assert steps["4"]["items_in"] == steps["3"]["kept"] > 0
