"""The CPU cost of taking a source clip in: ``videos normalize``'s path and ``qa``'s, against the
naive way, on the same clip in three containers, side by side in one run.

  ours       ``normalize_one``: one source into a fresh store (sha256, the demux pass, the plan,
             one decoding pass, the encode, ``meta.json``), one thread as a worker of
             ``--workers`` = cores gets
             ``qa``'s sampler: ``sample_jpegs`` (8 time-uniform frames, long side 768: ``qa run``'s
             defaults), the truncation check included
             the truncation check alone (``video.truncation.truncation``), on a demux pass
             already read: ms a call
  reference  the demux pass alone (``read_packets``: what the check reads; for MPEG-PS it decodes
             the stream once to time the frames without a pts)
  naive      a plain PyAV decode of every frame: what a reader that looks at every frame pays
             to find where a clip ends or to pick frames from it

Clips: ``--frames`` frames of 640x360 H.264 (textured, 30 fps, x264's B-frames) in MPEG-PS
(.mpg), mp4 and MPEG-TS (.ts), made with PyAV (``video.synth``). CPU seconds
(``time.process_time``: every thread of this process), the median of ``--repeats`` runs.
Numbers: decision 135.

Run: PYTHONPATH=src:. python -m benchmarks.video_ingest [--frames 600] [--repeats 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchcheck.qa.frames import sample_jpegs
from benchcheck.video.decode import open_video, read_packets
from benchcheck.video.store import SourceFile, normalize_one
from benchcheck.video.synth import make_test_video
from benchcheck.video.truncation import truncation
from benchmarks.shared.results import default_out, environment, write

# (file suffix, PyAV muxer)
CONTAINERS = ((".mpg", "mpeg"), (".mp4", "mp4"), (".ts", "mpegts"))
QA_FRAMES, QA_SIDE = 8, 768  # qa run's --num-frames and --max-side defaults
CHECK_CALLS = 200  # truncation checks a timed run (one takes well under a millisecond)


def cpu_model() -> str:
    """The CPU's name as Linux gives it (``platform.processor()`` is often empty)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def cpu_runs(fn: Callable[[], object], repeats: int) -> list[float]:
    """CPU seconds of each of ``repeats`` runs of ``fn``."""
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


def clip_rows(clip: Path, work: Path, repeats: int) -> dict[str, list[float]]:
    """Every variant's CPU seconds a run on one clip (the check's: a call)."""
    stores = work / f"stores{clip.suffix}"
    runs = 0

    def normalize() -> None:
        nonlocal runs
        runs += 1
        o = normalize_one(SourceFile(clip, f"bench::{clip.name}"), stores / str(runs), threads=1)
        assert o.status == "done", o.reason

    def qa() -> None:
        assert len(sample_jpegs(clip, QA_FRAMES, QA_SIDE)) == QA_FRAMES

    def demux() -> None:
        container, stream = open_video(clip)
        try:
            read_packets(container, stream)
        finally:
            container.close()

    def decode_all() -> None:
        import av

        with av.open(str(clip)) as c:
            for _ in c.decode(video=0):
                pass

    container, stream = open_video(clip)
    try:
        packets, index = read_packets(container, stream)
        assert truncation(container, stream, packets, index) is None

        def check() -> None:
            for _ in range(CHECK_CALLS):
                truncation(container, stream, packets, index)

        got = {"normalize": cpu_runs(normalize, repeats), "qa": cpu_runs(qa, repeats),
               "check": [s / CHECK_CALLS for s in cpu_runs(check, repeats)],
               "demux": cpu_runs(demux, repeats), "decode_all": cpu_runs(decode_all, repeats)}
    finally:
        container.close()
        shutil.rmtree(stores, ignore_errors=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=600, help="frames a clip (30 fps)")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    ap.add_argument("--repeats", type=int, default=5, help="runs a variant (the median is shown)")
    ap.add_argument("--work", default=None, help="folder for the clips and stores (default: a temporary one)")
    ap.add_argument("--out", default=default_out())
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="video_ingest_"))
    rows: list[dict[str, Any]] = []
    for suffix, muxer in CONTAINERS:
        clip = make_test_video(work / f"clip{suffix}", args.frames, fps=30.0, width=args.width, height=args.height,
                               textured=True, container=muxer)
        got = clip_rows(clip, work, args.repeats)
        med = {k: statistics.median(v) for k, v in got.items()}
        rows.append({"clip": clip.name, "bytes": clip.stat().st_size, "runs": got, "median": med})
        print(f"{clip.name}: " + ", ".join(f"{k} {v:.4f}" for k, v in med.items()), flush=True)
    env = environment(torch.device("cpu"), cpu=cpu_model(), cores=os.cpu_count(), frames=args.frames,
                      repeats=args.repeats)
    lines = [f"{env['date']}; {env['cpu']}, {env['cores']} cores; {args.frames} frames of "
             f"{args.width}x{args.height} H.264; CPU s, median of {args.repeats} runs (min-max)", "",
             "| clip | ours: normalize | ours: qa sampler | ours: truncation check, ms a call | "
             "demux pass | naive: decode every frame | normalize / naive | check / naive |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(r: dict[str, Any], k: str, scale: float = 1.0, digits: int = 2) -> str:
        v = r["runs"][k]
        return f"{scale * r['median'][k]:.{digits}f} ({scale * min(v):.{digits}f}-{scale * max(v):.{digits}f})"

    for r in rows:
        m = r["median"]
        lines.append(f"| {r['clip']} | {cell(r, 'normalize')} | {cell(r, 'qa')} | {cell(r, 'check', 1e3, 3)} | "
                     f"{cell(r, 'demux', digits=3)} | {cell(r, 'decode_all')} | "
                     f"{m['normalize'] / m['decode_all']:.2f}x | {m['check'] / m['decode_all']:.1e} |")
    write(Path(args.out), "video_ingest.json", {"env": env, "rows": rows}, "video_ingest.md", lines)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
