"""A sweep call's build: its cells' frames decoded one after another (naive) against together in
the frame pool (ours, ``GenerateTask.build``), with the limit the pool allows (decision 112).

The store is made as ``sweep_mix`` makes it (synthetic sources of realistic lengths, normalized);
one call is ``--chunk`` cells of ``--cond`` over those videos, built ``--repeats`` times each way,
alternating, with a ``FramePool`` of ``--workers`` processes. Per build: wall seconds and the
decodes' own seconds (each worker decodes on one core, so their sum is the build's CPU work).
The limit is the longer of the slowest cell's decode and the work spread over the workers.

    PYTHONPATH=src:. python -m benchmarks.sweep_build --out bench_out          # this machine
    PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.sweep_build --source-short 720 --out $OUT   # H200 host
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.shared.results import default_out, environment, write
from benchmarks.sweep_mix import build_store, cores, parse_videos, write_items


def built(cells: list[Any], specs: dict[str, Any], frames: Any, together: bool) -> tuple[float, float]:
    """(wall s, decode s summed) of one build of ``cells``."""
    from benchcheck.sweep.runner import Unit, prepare_unit
    from benchcheck.sweep.task import GenerateTask

    async def one_by_one() -> list[Any]:
        return [(c, await prepare_unit(Unit(c.item.bench, c.condition, (c,)), specs[c.condition], frames))
                for c in cells]

    t0 = time.perf_counter()
    out = asyncio.run(GenerateTask(specs, frames).build(cells) if together else one_by_one())
    wall = time.perf_counter() - t0
    if any(p.failures for _, p in out):
        raise SystemExit(f"a cell failed to decode: {next(p.failures for _, p in out if p.failures)}")
    return wall, sum(p.decode_s for _, p in out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", default="180:16x9:3,600:4x3:3,900:16x9:2", help="video classes SECONDS:WxH:COUNT")
    ap.add_argument("--cond", default="v_fps2_s224", help="the sweep condition of the call's cells")
    ap.add_argument("--chunk", type=int, default=8, help="cells a call (the sweep's hf call size)")
    ap.add_argument("--workers", type=int, default=0, help="frame pool processes (0: cores - 1, at least 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--source-short", type=int, default=240, help="sources' short side")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=default_out())
    a = ap.parse_args()
    from benchcheck.items import load_items
    from benchcheck.sweep.cli_run import plan
    from benchcheck.sweep.engine import SweepEngine
    from benchcheck.sweep.frames import FramePool
    from benchcheck.sweep.job import SweepArgs
    from benchcheck.sweep.results import SweepPaths

    classes = parse_videos(a.videos)
    workers = a.workers or max(2, cores() - 1)
    work = Path(a.workdir or tempfile.mkdtemp(prefix="sweep_build_"))
    ids, setup = build_store(work, classes, a.source_short)
    folder, _ = write_items(work, classes, ids, rounds=1)
    items = load_items(sorted(folder.glob("*.jsonl"))).items
    args = SweepArgs(items, str(work / "store"), SweepPaths.under(work / "results"), a.cond,
                     engine=SweepEngine("scripted"), progress=False)
    cells, specs, _ = plan(args)
    cells = [c for c in cells if c.condition == a.cond and c.plan is not None][:a.chunk]
    if len(cells) < a.chunk:
        raise SystemExit(f"--videos give {len(cells)} cells of {a.cond} with frames; need --chunk {a.chunk}")
    pool = FramePool(work / "store", workers)
    runs: dict[str, list[tuple[float, float]]] = {"naive": [], "ours": []}
    try:
        # A spawned pool starts its processes as jobs come: a build of as many cells as workers
        # starts them all (and each imports what a decode needs) before anything is timed.
        built(cells[:workers], specs, pool.frames, True)
        for _ in range(a.repeats):
            for way in ("naive", "ours"):
                runs[way].append(built(cells, specs, pool.frames, way == "ours"))
    finally:
        pool.close()
    alone = [built([c], specs, FramePool(work / "store", 0).frames, True)[1] for c in cells]
    limit = max(max(alone), sum(alone) / workers)
    rows = {way: {"wall_s": round(statistics.median(w for w, _ in r), 3),
                  "decode_s": round(statistics.median(d for _, d in r), 3)} for way, r in runs.items()}
    frames = sum(len(c.plan.indices) for c in cells if c.plan is not None)
    payload: dict[str, Any] = {"env": environment(torch.device("cpu"), cores=cores(), workers=workers, cond=a.cond,
                                  videos=a.videos, cells=len(cells), frames=frames, setup=setup),
                               "rows": rows, "limit_s": round(limit, 3), "alone_s": [round(x, 3) for x in alone]}
    lines = [f"# sweep call build ({a.cond}, {len(cells)} cells, {frames} frames; {workers} pool workers on "
             f"{cores()} cores; {payload['env']['date']})", "",
             "| way | wall s (median) | decodes s | vs limit |", "|---|---:|---:|---:|"]
    for way, r in rows.items():
        lines.append(f"| {way} | {r['wall_s']} | {r['decode_s']} | {r['wall_s'] / limit:.2f}x |")
    lines.append(f"| limit (slowest cell alone, or the decodes over the workers) | {limit:.3f} | | 1.00x |")
    write(Path(a.out), "sweep_build.json", payload, "sweep_build.md", lines)


if __name__ == "__main__":
    main()
