"""The host's cost of the vision tower's grid-derived inputs (``model.vision_inputs``) for one
engine batch's list of image grids that the list cache has not seen, in CPU milliseconds:

  ours        assembled from each distinct image shape's inputs (shapes met before: the steady
              state of a sweep, whose fps ladders on different videos rarely repeat a list)
  ours cold   the same with no shape seen yet (the first batch of each resolution)
  naive       transformers' functions on the whole list (the way before)
  limit       the assembled tensors' bytes written once (an empty tensor of each size filled)

The engine computes these under the model's lock after the previous batch's last read, so on a
GPU every millisecond here is one the device waits (decision 106). One thread, so the number does
not depend on how many cores the host lends torch beside the frame decoders.

Grids, in 16-pixel patches (t, h, w) of one frame each, as the engine's planner cuts batches:
  sweep item   582 frames at 224 x 416 (the 54,159-token sweep item)
  fps2 batch   2 requests of 391 frames, 16:9 and 4:3 at 224 px (v_fps2_s224: 31,085 tokens each)
  v32 batch    2 requests of 32 frames at 720p, 16:9 and 4:3 (v_32: ~22,900 tokens each)
  2B call      48 requests of 32 frames at 448 x 256 (screening step 3)

Run: PYTHONPATH=src:. python -m benchmarks.vision_inputs [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.model.vision_inputs import vision_inputs
from benchmarks.shared.results import default_out, environment, write
from benchmarks.shared.timing import best_of

GRIDS: dict[str, list[tuple[int, int, int]]] = {
    "sweep item": [(1, 14, 26)] * 582,
    "fps2 batch": [(1, 14, 24)] * 391 + [(1, 14, 18)] * 391,
    "v32 batch": [(1, 46, 80)] * 32 + [(1, 46, 60)] * 32,
    "2B call": [(1, 16, 28)] * (48 * 32),
}


def naive(visual: Any, grid: torch.Tensor) -> None:
    from transformers.vision_utils import (
        get_vision_cu_seqlens,
        get_vision_interpolation_indices_and_weights,
        get_vision_position_ids,
    )

    get_vision_interpolation_indices_and_weights(
        grid, num_grid_per_side=visual.num_grid_per_side, mode=visual.interpolation_mode,
        align_corners=visual.interpolation_align_corners, spatial_merge_size=visual.config.spatial_merge_size)
    get_vision_position_ids(grid, visual.spatial_merge_size)
    get_vision_cu_seqlens(grid)


def limit(patches: int) -> None:
    torch.empty((patches, 2), dtype=torch.long).fill_(1)
    torch.empty((patches, 4), dtype=torch.long).fill_(1)
    torch.empty((patches, 4), dtype=torch.float32).fill_(1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=default_out())
    args = ap.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoModelForImageTextToText

    from benchcheck.testing import build_tiny_model

    path = build_tiny_model(Path(tempfile.mkdtemp(prefix="vision_inputs_")) / "tiny", seed=0)
    model = AutoModelForImageTextToText.from_pretrained(path)
    visual = model.model.visual
    state = state_of(model)
    rows: list[dict[str, Any]] = []
    for name, shapes in GRIDS.items():
        grid = torch.tensor(shapes)
        patches = sum(t * h * w for t, h, w in shapes)

        def ours(cold: bool, grid: torch.Tensor = grid) -> None:
            state.vision_inputs.clear()
            if cold:
                state.vision_shapes.clear()
            vision_inputs(model, grid)

        def before(grid: torch.Tensor = grid) -> None:
            naive(visual, grid)

        def bare(patches: int = patches) -> None:
            limit(patches)

        ms = {
            "ours": best_of(lambda: ours(False), args.repeats, time.process_time),
            "ours_cold": best_of(lambda: ours(True), args.repeats, time.process_time),
            "naive": best_of(before, args.repeats, time.process_time),
            "limit": best_of(bare, args.repeats, time.process_time),
        }
        row = {"grid": name, "images": len(shapes), "patches": patches, **{k: round(1e3 * v, 2) for k, v in ms.items()}}
        rows.append(row)
        print(row, flush=True)
    env = environment(torch.device("cpu"), threads=1, repeats=args.repeats)
    lines = [f"{env['date']}; {env['device']}, 1 thread; CPU ms a batch's list of grids (least of {args.repeats})",
             "", "| grid list | images | patches | ours | ours, no shape seen | naive | limit | naive / ours |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['grid']} | {r['images']:,} | {r['patches']:,} | {r['ours']:.2f} | {r['ours_cold']:.2f} | "
              f"{r['naive']:.2f} | {r['limit']:.2f} | {r['naive'] / max(r['ours'], 1e-3):.0f}x |" for r in rows]
    write(Path(args.out), "vision_inputs.json", {"env": env, "rows": rows}, "vision_inputs.md", lines)


if __name__ == "__main__":
    main()
