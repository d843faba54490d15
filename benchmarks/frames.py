"""Frame extraction throughput: ours against the naive way, side by side in one run.

Sources (made once in ``--workdir``, reused by later runs):
  * ``source``: 60 s of 1280x720 H.264 at 30 fps with a 250-frame GOP and B-frames (like a
    downloaded video), a panning texture around each frame's painted index;
  * ``store``: the same video after ``benchcheck videos normalize`` (2 fps, GOP 32, CAVLC).
Plans: the 32-frame grid at 448 px long side (``v32``) and the 2-fps grid at short side 224
(``v_fps2_s224``). Methods, each producing the same JPEGs (q=85):
  * ``naive``: decode every frame, convert each to RGB at full size, keep the wanted ones
    (Pillow resize + JPEG);
  * ``pyav-seek``: ``container.seek`` to the keyframe before each wanted frame and decode on;
  * ``seek`` / ``sequential``: our decoder forced to one strategy;
  * ``ours``: our decoder choosing per frame (benchcheck.video.decode).
Every decoder runs single-threaded; times are CPU seconds of this process (so other work on
the machine disturbs them little); ``fps/core`` = kept frames per CPU second.

``--gop-sweep`` adds the store keyframe-interval trade-off: a 1,024-frame 640x360 store
encoded at several GOPs, its size and the CPU time of each plan.

    python -m benchmarks.frames                     # about 3 minutes on 2 cores
    python -m benchmarks.frames --gop-sweep --json docs/perf_frames.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from benchcheck.video.decode import DecodeStats, decode_frames, open_video, read_packets
from benchcheck.video.extract import frame_to_jpeg
from benchcheck.video.normalize import transcode
from benchcheck.video.plans import FramePlan, plan_frames
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video, read_frame_index

PLANS = ("v32", "v_fps2_s224")
SWEEP_PLANS = ("mid", "v32", "v_fps0.25_s224", "v_fps1_s224", "v_fps2_s224")


def cpu_time(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """(best CPU seconds, wall seconds of that run, result) over ``repeats`` runs."""
    best = (float("inf"), 0.0, None)
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        c, w = time.process_time() - c0, time.perf_counter() - w0
        if c < best[0]:
            best = (c, w, out)
    return best


def naive(path: Path, plan: FramePlan) -> dict[int, bytes]:
    """Decode every frame, convert each to RGB, keep the wanted ones (resize + JPEG)."""
    import av

    wanted = set(plan.indices)
    out: dict[int, bytes] = {}
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.codec_context.thread_count = 1
        for i, frame in enumerate(c.decode(s)):
            rgb = frame.to_ndarray(format="rgb24")
            if i in wanted:
                buf = io.BytesIO()
                Image.fromarray(rgb).resize((plan.width, plan.height), Image.Resampling.BICUBIC).save(
                    buf, "JPEG", quality=85)
                out[i] = buf.getvalue()
    return out


def pyav_seek(path: Path, plan: FramePlan) -> dict[int, bytes]:
    """``container.seek`` to the keyframe before each wanted frame, then decode up to it."""
    container, stream = open_video(path)
    try:
        _, index = read_packets(container, stream)
        out: dict[int, bytes] = {}
        for i in sorted(set(plan.indices)):
            if i in out:
                continue
            container.seek(index.pts[i], stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                if frame.pts is not None and frame.pts >= index.pts[i]:
                    out[i] = frame_to_jpeg(frame, plan.width, plan.height)
                    break
        return out
    finally:
        container.close()


LAST_STATS: dict[str, DecodeStats] = {}


def ours(strategy: str) -> Callable[[Path, FramePlan], dict[int, bytes]]:
    def run(path: Path, plan: FramePlan) -> dict[int, bytes]:
        stats = LAST_STATS[strategy] = DecodeStats()
        return decode_frames(path, plan.unique_indices, lambda f: frame_to_jpeg(f, plan.width, plan.height),
                             strategy=strategy, stats=stats)  # type: ignore[arg-type]
    return run


METHODS: dict[str, Callable[[Path, FramePlan], dict[int, bytes]]] = {
    "naive": naive, "pyav-seek": pyav_seek, "seek": ours("seek"), "sequential": ours("sequential"),
    "ours": ours("auto")}


def stream_facts(path: Path) -> tuple[list[float], int, int, float]:
    container, stream = open_video(path)
    try:
        _, index = read_packets(container, stream)
        return index.timestamps, stream.codec_context.width, stream.codec_context.height, index.mean_gop
    finally:
        container.close()


def make_sources(work: Path, tiny: bool = False) -> dict[str, Path]:
    """The source and its normalized store; ``tiny``: 4 s at 320x180 (a smoke run's)."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / ("source_180p_4s_gop250.mp4" if tiny else "source_720p_60s_gop250.mp4")
    if not src.exists():
        print("making the source video...", flush=True)
        n, w, h = (120, 320, 180) if tiny else (1800, 1280, 720)
        make_test_video(src.with_suffix(".tmp.mp4"), n, fps=30.0, width=w, height=h, gop=250,
                        textured=True, preset="fast")
        os.replace(src.with_suffix(".tmp.mp4"), src)
    store = work / "store"
    report = normalize_videos([src], store)
    vid = report.outcomes[0].content_hash
    assert vid, report.outcomes[0].reason
    return {"source": src, "store": store / "normalized" / vid / "video.mp4"}


def compare(sources: dict[str, Path], repeats: int) -> list[dict[str, Any]]:
    """Every method on every source and plan; repeats interleave the methods so that load on
    the machine hits them alike, and the best CPU time of each is kept."""
    rows = []
    for sname, path in sources.items():
        ts, w, h, gop = stream_facts(path)
        for pname in PLANS:
            plan = plan_frames(pname, ts, w, h)
            results: dict[str, dict[int, bytes]] = {}
            row: dict[str, Any] = {"source": sname, "plan": pname, "stored_frames": len(ts), "mean_gop": gop,
                                   "frames": len(plan.unique_indices)}
            for rep in range(repeats):
                for mname, fn in METHODS.items():
                    if rep and mname in ("naive", "pyav-seek") and sname == "source":
                        continue  # slow and far behind: one run is enough
                    cpu, wall, out = cpu_time(lambda f=fn, v=path, p=plan: f(v, p), 1)  # type: ignore[misc]
                    results[mname] = out
                    if mname in row and row[mname]["cpu_s"] <= cpu:
                        continue
                    row[mname] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                                  "fps_per_core": round(len(plan.unique_indices) / cpu, 1)}
                    st = LAST_STATS.pop({"ours": "auto"}.get(mname, mname), None)
                    if st is not None:
                        row[mname].update(packets=st.packets, decoded=st.decoded, runs=st.runs)
            for mname in METHODS:
                print(f"  {sname:6s} {pname:12s} {mname:10s} cpu {row[mname]['cpu_s']:6.2f} s", flush=True)
            painted = {i: read_frame_index(b) for i, b in results["ours"].items()}
            expected = dict(zip(plan.unique_indices,
                                [read_frame_index(results["naive"][i]) for i in plan.unique_indices], strict=True))
            assert painted == expected, "ours picked other frames than the naive way"
            assert results["seek"] == results["sequential"] == results["ours"] == results["pyav-seek"]
            best_pure = min(row["seek"]["cpu_s"], row["sequential"]["cpu_s"])
            row["ours_vs_naive"] = round(row["naive"]["cpu_s"] / row["ours"]["cpu_s"], 2)
            row["ours_vs_best_pure"] = round(best_pure / row["ours"]["cpu_s"], 2)
            rows.append(row)
    return rows


def gop_sweep(work: Path, configs: list[str], repeats: int) -> list[dict[str, Any]]:
    """A 1,024-frame store (8.5 min at 2 fps, 640x360) encoded per config: size and plan costs.

    A config is ``<gop>`` (the store's CAVLC entropy coding) or ``<gop>:cabac``.
    """
    src = work / "sweep_source_640x360_1024f.mp4"
    if not src.exists():
        print("making the 1,024-frame sweep source...", flush=True)
        make_test_video(src.with_suffix(".tmp.mp4"), 1024, fps=2.0, width=640, height=360, gop=250, textured=True,
                        preset="fast", crf=18)
        os.replace(src.with_suffix(".tmp.mp4"), src)
    rows = []
    for config in configs:
        gop, _, entropy = config.partition(":")
        dest = work / f"sweep_store_gop{gop}{'_cabac' if entropy else ''}.mp4"
        if not dest.exists():
            transcode(src, dest.with_suffix(".tmp.mp4"), gop=int(gop), x264_params="" if entropy else "cabac=0")
            os.replace(dest.with_suffix(".tmp.mp4"), dest)
        ts, w, h, _ = stream_facts(dest)
        row: dict[str, Any] = {"gop": config, "size_kb": dest.stat().st_size // 1024, "frames": len(ts)}
        for pname in SWEEP_PLANS:
            plan = plan_frames(pname, ts, w, h)
            cpu, _, _ = cpu_time(lambda d=dest, p=plan: ours("auto")(d, p), repeats)  # type: ignore[misc]
            row[pname] = round(cpu * 1000)
        print(f"  gop {config}: {row}", flush=True)
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| source | plan | frames kept / stored | naive | pyav-seek | seek | sequential | **ours** "
            "| ours ÷ naive | ours ÷ best of seek, sequential | packets decoded: seek / sequential / ours |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        cells = " | ".join(f"{r[m]['fps_per_core']:.0f}" for m in ("naive", "pyav-seek", "seek", "sequential"))
        lines.append(f"| {r['source']} (GOP {r['mean_gop']:.0f}) | {r['plan']} | {r['frames']} / {r['stored_frames']} "
                     f"| {cells} | **{r['ours']['fps_per_core']:.0f}** | {r['ours_vs_naive']:.2f}x "
                     f"| {r['ours_vs_best_pure']:.2f}x "
                     f"| {r['seek']['packets']} / {r['sequential']['packets']} / {r['ours']['packets']} |")
    return "\n".join(lines)


def sweep_markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| GOP | size (KB) | " + " | ".join(f"{p} (ms)" for p in SWEEP_PLANS) + " |",
             "|---|---|" + "---|" * len(SWEEP_PLANS)]
    for r in rows:
        lines.append(f"| {r['gop']} | {r['size_kb']} | " + " | ".join(str(r[p]) for p in SWEEP_PLANS) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/benchcheck_bench_frames"))
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (best CPU time kept)")
    ap.add_argument("--gop-sweep", action="store_true", help="also measure the store's keyframe interval")
    ap.add_argument("--gops", default="8,16,32,64,250,32:cabac",
                    help="store configs for --gop-sweep: <gop> (CAVLC, the store's) or <gop>:cabac")
    ap.add_argument("--json", type=Path, default=None, help="write the raw numbers here")
    ap.add_argument("--tiny", action="store_true", help="a 4 s 320x180 source (a smoke run)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"python {platform.python_version()}", flush=True)
    rows = compare(make_sources(args.workdir, args.tiny), args.repeats)
    print("\nframes per second per core (CPU time, single-threaded decoder):\n")
    print(markdown(rows))
    sweep = gop_sweep(args.workdir, args.gops.split(","), args.repeats) if args.gop_sweep else []
    if sweep:
        print("\nstore keyframe interval (1,024 frames, 640x360; CPU ms per video and plan):\n")
        print(sweep_markdown(sweep))
    if args.json:
        args.json.write_text(json.dumps({"compare": rows, "gop_sweep": sweep}, indent=1))


if __name__ == "__main__":
    main()
