"""The whole chain 1 -> 6 on a small pool with real frames: in-process and through `launch` with two
CPU `benchcheck serve` processes give the same decisions at every step."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from screen_helpers import cli, ok_rows
from test_screen_launch import free_port_block

from benchcheck.demo.items import write_demo_items
from benchcheck.demo.videos import make_demo_videos, store_and_cache


# Twelve CLI runs, six of them with two loaded servers each: minutes on a loaded 2-core machine.
@pytest.mark.timeout(1800)
def test_chain_in_process_equals_launched(tmp_path: Path, tiny_model: Path) -> None:
    frames = tmp_path / "pool_frames"
    ids = store_and_cache(make_demo_videos(tmp_path / "videos", n=2), tmp_path / "store", frames)
    write_demo_items(tmp_path / "items", video_ids=ids)
    common = ["--items", str(tmp_path / "items"), "--limit", "21", "--frames", str(frames), "--model", str(tiny_model)]
    for step in range(1, 7):
        local = cli("screen", "--step", str(step), "--results", str(tmp_path / "local"), "--engine", "hf",
                    "--device", "cpu", "--no-progress", *common)
        assert local.returncode == 0, local.stderr[-2000:]
        served = cli("launch", "--step", str(step), "--gpus", "2", "--port0", str(free_port_block(2)),
                     "--results", str(tmp_path / "served"), "--logs", str(tmp_path / "logs"), "--workers", "8",
                     *common, timeout=600)
        assert served.returncode == 0, served.stdout[-2000:] + served.stderr[-2000:]
        a, b = ok_rows(tmp_path / "local" / f"step{step}"), ok_rows(tmp_path / "served" / f"step{step}")
        assert a and set(a) == set(b), step
        for i in a:
            assert a[i]["removed"] == b[i]["removed"], (step, i)
            assert a[i].get("picks", a[i].get("pick")) == b[i].get("picks", b[i].get("pick")), (step, i)
            la, lb = a[i]["lp"], b[i]["lp"]
            flat_a = [x for row in la for x in row] if step == 1 else la
            flat_b = [x for row in lb for x in row] if step == 1 else lb
            assert all(math.isclose(x, y, abs_tol=1e-3) for x, y in zip(flat_a, flat_b, strict=True)), (step, i)
        if step in (2, 3, 5, 6):
            assert all(r["frames"]["n"] == (1 if step == 2 else 32) for r in a.values())
    assert any(r.get("frames", {}).get("shuffle_seed") for r in ok_rows(tmp_path / "local" / "step5").values())
