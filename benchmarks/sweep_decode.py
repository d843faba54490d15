"""The sweep's fps2 ladder decode: naive vs OpenCV seeking vs ours (1 process, N processes).

Sources (made once in ``--workdir``): a ``--minutes`` (default 10) 1280x720 H.264 video at
30 fps, 250-frame GOP with B-frames and a panning texture (like a downloaded video), and its
normalized copy (``benchcheck videos normalize``: 2 fps, short side 720, GOP 32). The plan is
``v_fps2_s224`` over each file's own frames: the 2-fps grid, capped at N_max = 582 frames of
398x224 (97 tokens each), exactly what the sweep sends. Methods, each producing the 582 JPEGs
(q=85, 398x224):

* ``naive``: decode every frame, convert each to RGB, keep the wanted ones;
* ``opencv-seek``: ``cv2.VideoCapture`` + ``set(CAP_PROP_POS_FRAMES, i)`` + ``read()`` per
  wanted frame (the origin's fallback decoder), ``cv2.resize(INTER_AREA)`` + ``imencode``;
* ``ours``: ``benchcheck.video.decode`` in this process (one codec thread);
* ``ours xN``: N worker processes, each decoding the plan once (the sweep's decode pool:
  videos in parallel); aggregate frames/s over wall time.

Every decoder runs single-threaded and is timed in CPU seconds (``ours xN``: the workers' own CPU
seconds, summed), so ``fps/core`` = frames delivered per CPU second and stays comparable on a
loaded machine; ``ours xN`` also reports wall-clock frames/s, which on an idle machine with N free
cores is about N x its fps/core.

    python -m benchmarks.sweep_decode --minutes 10 --procs 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchcheck.video.decode import decode_frames
from benchcheck.video.extract import frame_to_jpeg
from benchcheck.video.plans import FramePlan, plan_frames
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video, read_frame_index
from benchmarks.frames import cpu_time, naive, stream_facts

PLAN = "v_fps2_s224"


def opencv_seek(path: Path, plan: FramePlan, limit: int = 0) -> dict[int, bytes]:
    """``limit`` > 0: only the first ``limit`` wanted frames (its per-frame cost is the same for every
    frame: a seek to the keyframe before it and a decode up to it)."""
    import cv2

    cv2.setNumThreads(1)
    cap = cv2.VideoCapture(str(path))
    out: dict[int, bytes] = {}
    wanted = plan.unique_indices[:limit] if limit else plan.unique_indices
    try:
        for i in wanted:
            cap.set(cv2.CAP_PROP_POS_FRAMES, i)
            ok, bgr = cap.read()
            if not ok:
                raise RuntimeError(f"opencv could not read frame {i}")
            small = cv2.resize(bgr, (plan.width, plan.height), interpolation=cv2.INTER_AREA)
            ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 85])
            out[i] = buf.tobytes()
    finally:
        cap.release()
    return out


def ours(path: Path, plan: FramePlan) -> dict[int, bytes]:
    return decode_frames(path, plan.unique_indices, lambda f: frame_to_jpeg(f, plan.width, plan.height))


def _worker(path: str, plan: FramePlan) -> tuple[int, float]:
    c0 = time.process_time()
    n = len(ours(Path(path), plan))
    return n, time.process_time() - c0


def ours_pool(path: Path, plan: FramePlan, procs: int) -> tuple[float, float]:
    """(wall seconds, summed worker CPU seconds) for ``procs`` processes decoding the plan once each,
    after every worker has imported and decoded once."""
    with ProcessPoolExecutor(procs) as pool:
        list(pool.map(_worker, [str(path)] * procs, [plan] * procs))  # warm every worker
        t0 = time.perf_counter()
        done = list(pool.map(_worker, [str(path)] * procs, [plan] * procs))
        return time.perf_counter() - t0, sum(c for _, c in done)


CLIP_FRAMES = 750  # 25 s at 30 fps: three 250-frame GOPs, repeated to the asked length


def concat_copies(clip: Path, dest: Path, copies: int) -> None:
    """``copies`` back-to-back stream copies of ``clip`` (no re-encode: each copy starts at an IDR
    frame with a closed GOP, so the decode cost per frame is that of the clip)."""
    import av

    with av.open(str(clip)) as src, av.open(str(dest), "w", format="mp4") as out:
        ins = src.streams.video[0]
        outs = out.add_stream_from_template(ins)
        packets = [p for p in src.demux(ins) if p.size > 0]
        span = CLIP_FRAMES * round(1 / (float(ins.time_base or 0) * 30))
        for k in range(copies):
            for p in packets:
                q = av.Packet(bytes(p))
                q.pts, q.dts = int(p.pts or 0) + k * span, int(p.dts or 0) + k * span
                q.time_base, q.is_keyframe = p.time_base, p.is_keyframe
                q.stream = outs
                out.mux(q)


def make_sources(work: Path, minutes: float, preset: str) -> dict[str, Path]:
    work.mkdir(parents=True, exist_ok=True)
    n = int(minutes * 60 * 30)
    src = work / f"source_720p_{minutes:g}min_gop250_{preset}.mp4"
    if not src.exists():
        clip = work / f"clip_720p_{CLIP_FRAMES}f_gop250_{preset}.mp4"
        if not clip.exists():
            print(f"making the {CLIP_FRAMES}-frame 720p clip...", flush=True)
            make_test_video(clip.with_suffix(".tmp.mp4"), CLIP_FRAMES, fps=30.0, width=1280, height=720, gop=250,
                            textured=True, preset=preset, bframes=3)
            os.replace(clip.with_suffix(".tmp.mp4"), clip)
        print(f"stream-copying it to a {minutes:g}-minute source ({n} frames)...", flush=True)
        concat_copies(clip, src.with_suffix(".tmp.mp4"), max(1, n // CLIP_FRAMES))
        os.replace(src.with_suffix(".tmp.mp4"), src)
    store = work / "store"
    report = normalize_videos([src], store, workers=1)
    vid = report.outcomes[0].content_hash
    assert vid, report.outcomes[0].reason
    return {"source": src, "normalized": store / "normalized" / vid / "video.mp4"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/benchcheck_sweep_decode"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--preset", default="ultrafast", help="x264 preset of the source (3 B-frames whatever it is)")
    ap.add_argument("--opencv-frames", type=int, default=100, help="opencv-seek: the first N wanted frames (0: all)")
    ap.add_argument("--skip", default="", help="methods to skip, comma-separated (e.g. opencv-seek)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    skip = set(a.skip.split(",")) - {""}
    rows: list[dict[str, Any]] = []
    for name, path in make_sources(a.workdir, a.minutes, a.preset).items():
        ts, w, h, gop = stream_facts(path)
        plan = plan_frames(PLAN, ts, w, h)
        n = len(plan.unique_indices)
        row: dict[str, Any] = {"source": name, "stored_frames": len(ts), "mean_gop": round(gop, 1), "frames": n,
                               "capped_ctx": plan.extra["capped_ctx"], "size": f"{plan.width}x{plan.height}"}
        results = {}
        def cv(p: Path, q: FramePlan) -> dict[int, bytes]:
            return opencv_seek(p, q, a.opencv_frames)

        for mname, fn in (("naive", naive), ("opencv-seek", cv), ("ours", ours)):
            if mname in skip:
                continue
            cpu, wall, out = cpu_time(lambda f=fn, p=path, q=plan: f(p, q), 1)  # type: ignore[misc]
            results[mname] = out
            k = len(out)
            row[mname] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "frames": k,
                          "fps_per_core": round(k / cpu, 1)}
            print(f"  {name:10s} {mname:12s} {k:4d} frames cpu {cpu:7.2f} s  {k / cpu:7.1f} frames/s/core", flush=True)
        wall, cpu = ours_pool(path, plan, a.procs)
        total = a.procs * n
        row[f"ours x{a.procs}"] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "fps_wall": round(total / wall, 1),
                                   "fps_per_core": round(total / cpu, 1)}
        print(f"  {name:10s} ours x{a.procs:<6d} {total:4d} frames wall {wall:7.2f} s cpu {cpu:7.2f} s  "
              f"{total / wall:7.1f} frames/s  {total / cpu:7.1f} frames/s/core", flush=True)
        if "naive" in results:  # same frames picked (the painted index survives resizing and JPEG)
            want = {i: read_frame_index(b) for i, b in results["naive"].items()}  # painted: index in the clip
            for m, r in results.items():
                assert all(read_frame_index(b) == want[i] for i, b in r.items()), f"{m} picked other frames"
        rows.append(row)
    meta = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
            "python": sys.version.split()[0], "minutes": a.minutes, "procs": a.procs, "plan": PLAN}
    print(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if a.json:
        a.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
