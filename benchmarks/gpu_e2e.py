"""End to end: ``benchcheck screen --step 3`` from a JPEG frame cache against the engine alone.

Used by ``gpu_screen.py`` (workload ``e2e``); ``gpu_pool.py`` shares its model writer and row
watcher. Builds, in a temporary folder, a model checkpoint
(the random-weight 2B shape on a GPU, the tiny model on the CPU), a frame cache of real 448x256
JPEG q85 grids (``pool_frames/<video_id>/frame_<k>.jpg`` + ``frames.json``) and a JSONL benchmark,
then times, on the same items:
  engine  ``HFEngine.score_sync`` on step 3's requests (frames as cache paths: decoding included)
  screen  the CLI in a child process; its rate is read off the result rows as they land (first
          row to last), so model loading and compilation stay out of it; wall time is reported too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchcheck.engines.base import LetterScores
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.items import load_items
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec
from benchmarks.shared.workloads import write_grid

N_GRID = 32


def write_model(root: Path, device: torch.device, tiny_dir: Path | None, shape: str = "qwen3-vl-2b",
                name: str = "model") -> Path:
    """A random-weight checkpoint of ``shape`` in ``root/name`` (``tiny_dir`` instead when given);
    a folder a finished earlier write left (its ``done`` marker) is reused."""
    if tiny_dir is not None:
        return tiny_dir
    folder = root / name
    if (folder / "done").is_file():
        return folder
    from benchcheck.testing.random_weights import build_random_model

    built = build_random_model(shape, device=str(device))
    built.model.save_pretrained(folder)
    built.tokenizer.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps(built.preprocessor_config))
    (folder / "done").write_text(shape)
    del built
    torch.cuda.empty_cache()
    return folder


def write_pool(root: Path, n_items: int, jpegs: list[bytes]) -> tuple[Path, Path]:
    """A frame cache with one 32-frame grid per item, and the items' JSONL file."""
    cache = root / "pool_frames"
    rows = []
    for i in range(n_items):
        vid = f"{i:016x}"
        write_grid(cache, vid, [jpegs[(i * 5 + k) % len(jpegs)] for k in range(N_GRID)])
        rows.append({"item_id": f"E2E_{i}", "question": f"what does the person in clip {i} do after the door opens?",
                     "options": ["runs away", "sits down", "waves at the camera", "reads a book", "opens a box"],
                     "answer": i % 5, "video_id": vid})
    items = root / "E2E.jsonl"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return cache, items


def engine_rate(folder: Path, device: torch.device, items_path: Path, cache: Path) -> tuple[float, int]:
    engine = HFEngine(folder, device=str(device))
    items = load_items([items_path]).items
    reqs = [r for it in items for r in build_item_requests(
        default_run_spec(3), it, [cache / str(it.video_id) / f"frame_{k}.jpg" for k in range(N_GRID)]).requests]
    engine.score_sync(reqs[:16])  # warm-up (compiles)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    res = engine.score_sync(reqs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    assert all(isinstance(r, LetterScores) for r in res), [r for r in res if not isinstance(r, LetterScores)][:1]
    del engine
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return len(reqs) / dt, len(reqs)


def count_rows(step_dir: Path) -> int:
    return sum(sum(1 for _ in p.open()) for p in step_dir.glob("*.jsonl")) if step_dir.is_dir() else 0


def watch_screen(cmd: list[str], step_dir: Path, device: torch.device, timeout_s: float) -> dict[str, Any]:
    """Run a ``benchcheck screen`` command as a child, watching its rows land in ``step_dir``: wall
    time, time to the first row (model load, compilation, one engine call), the steady rate from
    the first row to the last, GPU busy over the whole run and over that steady window (NVML; nan
    without it). Past ``timeout_s`` the child's process group is stopped: its rows so far count."""
    from benchmarks.shared.nvml import Nvml

    seen: list[tuple[float, int, int]] = []  # (time, rows, NVML samples so far)
    stop = threading.Event()
    nvml = Nvml() if device.type == "cuda" else None
    with contextlib.ExitStack() as stack:
        samples = stack.enter_context(nvml.sampling(0.02)) if nvml is not None else []

        def poll() -> None:
            last = -1
            while not stop.wait(0.05):
                n = count_rows(step_dir)
                if n != last:
                    seen.append((time.perf_counter(), n, len(samples)))
                    last = n

        t0 = time.perf_counter()
        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
        stop.set()
        thread.join()
        wall = time.perf_counter() - t0
    landed = [s for s in seen if s[1] > 0]
    first, last = (landed[0], landed[-1]) if landed else ((t0, 0, 0), (t0, 0, 0))
    steady = (last[1] - first[1]) / (last[0] - first[0]) if last[0] > first[0] else float("nan")
    window = samples[first[2]:last[2]]
    return {"rc": proc.returncode, "timed_out": timed_out, "wall_s": wall, "rows": count_rows(step_dir),
            "steady_items_per_s": steady, "first_row_s": first[0] - t0 if landed else float("nan"),
            "busy": float(np.mean([s.busy for s in samples])) / 100 if samples else float("nan"),
            "busy_steady": float(np.mean([s.busy for s in window])) / 100 if window else float("nan"),
            "output_tail": (out or "")[-2000:]}


def screen_rate(folder: Path, device: torch.device, items_path: Path, cache: Path, results: Path,
                n_items: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchcheck", "screen", "--items", str(items_path), "--step", "3", "--chain", "3",
           "--results", str(results), "--engine", "hf", "--model", str(folder), "--frames", str(cache),
           "--device", device.type, "--no-progress", *extra]
    got = watch_screen(cmd, results / "step3", device, 900)
    if got["rc"] != 0 or got["rows"] != n_items:
        raise SystemExit(f"screen failed (exit {got['rc']}, {got['rows']}/{n_items} rows): {got['output_tail']}")
    return {k: got[k] for k in ("wall_s", "rows", "steady_items_per_s", "first_row_s")}
