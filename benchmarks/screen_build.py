"""The host's cost of building a visual screening step's requests from a JPEG frame cache:
``ScoreTask.build_now`` (frames read, requests built) per item, in CPU seconds, on the pool
``gpu_pool.py`` builds (3 questions a video, 32-frame grids of 448-px JPEGs).

  ours   ``ScoreTask.build_now`` with ``CacheFrames``: ``frames.json`` read once a grid, each
         video's grid read once a chunk (decision 105)
  naive  the way before: every item reads its grid, each of its 32 frames reading and parsing
         ``frames.json`` again (``load_cached_frame`` per position)
  limit  the 32 files of each video read once, nothing parsed, no request built

The build threads hold Python's lock while they parse, so every CPU-millisecond here is one the
launching thread may wait for (decision 105's profiles).

Run: PYTHONPATH=src:. python -m benchmarks.screen_build [--videos 200] [--chunk 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from benchcheck.items import Item, load_items
from benchcheck.screen.frames import CacheFrames
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import STEPS, default_run_spec
from benchcheck.screen.task import ScoreTask
from benchcheck.video import plans
from benchcheck.video.cache import cached_files, frame_dir, load_cached_frame
from benchmarks.gpu_pool import BENCHES, PER_VIDEO, write_pool
from benchmarks.shared.results import default_out, environment, write
from benchmarks.shared.timing import best_of


def naive(task: ScoreTask, root: Path, items: Sequence[Item]) -> None:
    for item in items:
        assert item.video_id
        grid = [load_cached_frame(root, item.video_id, k) for k in range(plans.GRID32)]
        build_item_requests(task.spec, item, grid)


def limit(root: Path, items: Sequence[Item]) -> None:
    for vid in dict.fromkeys(i.video_id for i in items):
        assert vid
        folder = frame_dir(root, vid)
        for k in range(plans.GRID32):
            (folder / f"frame_{k}.jpg").read_bytes()


def timed(fn: Callable[[], None], repeats: int) -> float:
    """The least CPU seconds of ``repeats`` runs (the page cache warm after the first)."""
    return best_of(fn, repeats, time.process_time)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--videos", type=int, default=200, help="videos a benchmark (3 questions each)")
    ap.add_argument("--chunk", type=int, default=64, help="items a build call (a unit's engine call)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=default_out())
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="screen_build_"))
    per_bench = args.videos * PER_VIDEO
    items_dir, cache = write_pool(work, per_bench, per_bench)
    items = [i for i in load_items([items_dir]).items if i.video_id and cached_files(cache, i.video_id)]
    rows: list[dict[str, Any]] = []
    for k in (2, 3):
        task = ScoreTask(default_run_spec(k), k, CacheFrames(cache))
        chunks = [items[j:j + args.chunk] for j in range(0, len(items), args.chunk)]

        def ours(task: ScoreTask = task, chunks: list[list[Item]] = chunks) -> None:
            for c in chunks:
                task.build_now(c)

        def before(task: ScoreTask = task) -> None:
            naive(task, cache, items)

        got = {"ours": timed(ours, args.repeats), "naive": timed(before, args.repeats),
               "limit": timed(lambda: limit(cache, items), args.repeats)}
        per = {m: 1e3 * s / len(items) for m, s in got.items()}
        rows.append({"step": k, "items": len(items), **{f"{m}_ms_per_item": round(v, 3) for m, v in per.items()}})
        print(f"step {k}: {len(items)} items, CPU ms an item: ours {per['ours']:.3f}, naive {per['naive']:.3f}, "
              f"limit {per['limit']:.3f}", flush=True)
    env = environment(torch.device("cpu"), videos=args.videos * BENCHES, chunk=args.chunk, cores=os.cpu_count())
    lines = [f"{env['date']}; {env['device']}, {env['cores']} cores; {args.videos * BENCHES} videos, "
             f"{len(items)} items, chunks of {args.chunk}", "",
             "| step | items | ours, CPU ms an item | naive | limit (bare reads) | ours / naive |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['step']} {STEPS[r['step']].name} | {r['items']} | {r['ours_ms_per_item']:.3f} | "
              f"{r['naive_ms_per_item']:.3f} | {r['limit_ms_per_item']:.3f} | "
              f"{r['ours_ms_per_item'] / r['naive_ms_per_item']:.2f} |" for r in rows]
    write(Path(args.out), "screen_build.json", {"env": env, "rows": rows}, "screen_build.md", lines)


if __name__ == "__main__":
    main()
