"""End to end: ``benchcheck screen --step 3`` from a JPEG frame cache against the engine alone.

Used by ``gpu_screen.py`` (workload ``e2e``). Builds, in a temporary folder, a model checkpoint
(the random-weight 2B shape on a GPU, the tiny model on the CPU), a frame cache of real 448x256
JPEG q85 grids (``pool_frames/<video_id>/frame_<k>.jpg`` + ``frames.json``) and a JSONL benchmark,
then times, on the same items:
  engine  ``HFEngine.score_sync`` on step 3's requests (frames as cache paths: decoding included)
  screen  the CLI in a child process; its rate is read off the result rows as they land (first
          row to last), so model loading and compilation stay out of it; wall time is reported too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.base import LetterScores
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.items import load_items
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec

N_GRID = 32


def write_model(root: Path, device: torch.device, tiny_dir: Path | None) -> Path:
    if tiny_dir is not None:
        return tiny_dir
    from benchcheck.testing.random_weights import build_random_model

    built = build_random_model("qwen3-vl-2b", device=str(device))
    folder = root / "model"
    built.model.save_pretrained(folder)
    built.tokenizer.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps(built.preprocessor_config))
    del built
    torch.cuda.empty_cache()
    return folder


def write_pool(root: Path, n_items: int, jpegs: list[bytes]) -> tuple[Path, Path]:
    """A frame cache with one 32-frame grid per item, and the items' JSONL file."""
    cache = root / "pool_frames"
    rows = []
    for i in range(n_items):
        vid = f"{i:016x}"
        folder = cache / vid
        folder.mkdir(parents=True)
        files = []
        for k in range(N_GRID):
            (folder / f"frame_{k}.jpg").write_bytes(jpegs[(i * 5 + k) % len(jpegs)])
            files.append(f"frame_{k}.jpg")
        meta = {"video_id": vid, "plan": "v32", "long_side": 448, "short_side": None, "jpeg_quality": 85,
                "n_stored": 64, "positions": list(range(N_GRID)), "indices": [2 * k for k in range(N_GRID)],
                "timestamps": [float(k) for k in range(N_GRID)], "sizes": [[448, 256]] * N_GRID, "files": files}
        (folder / "frames.json").write_text(json.dumps(meta))
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


def screen_rate(folder: Path, device: torch.device, items_path: Path, cache: Path, results: Path,
                n_items: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchcheck", "screen", "--items", str(items_path), "--step", "3", "--chain", "3",
           "--results", str(results), "--engine", "hf", "--model", str(folder), "--frames", str(cache),
           "--device", device.type, "--no-progress", *extra]
    seen: list[tuple[float, int]] = []
    stop = threading.Event()

    def rows() -> int:
        return sum(sum(1 for _ in p.open()) for p in (results / "step3").glob("*.jsonl")) if (
            results / "step3").is_dir() else 0

    def poll() -> None:
        last = -1
        while not stop.wait(0.05):
            n = rows()
            if n != last:
                seen.append((time.perf_counter(), n))
                last = n

    t0 = time.perf_counter()
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    stop.set()
    thread.join()
    wall = time.perf_counter() - t0
    n = rows()
    if proc.returncode != 0 or n != n_items:
        raise SystemExit(f"screen failed (exit {proc.returncode}, {n}/{n_items} rows): {proc.stderr[-2000:]}")
    first = next((t, k) for t, k in seen if k > 0)
    last = seen[-1]
    steady = (last[1] - first[1]) / (last[0] - first[0]) if last[0] > first[0] else float("nan")
    return {"wall_s": wall, "rows": n, "steady_items_per_s": steady, "first_row_s": first[0] - t0}
