"""QA harness overhead: what the benchmark adds on top of the VLM and the judge it measures.

Three comparisons, each side by side in one run:

1. **Command VLM call**: ``run_with_watchdog`` (own session, watchdog, pipes collected as they
   arrive, the item's processes found and killed at exit: /proc scan, token, subreaper)
   against a bare ``subprocess.run(shell=True)`` of the same trivial command, which is the
   floor (process start-up). The difference is the harness's per-item latency overhead.
2. **Frame sampling (endpoint mode)**: ``sample_jpegs`` (on ``benchcheck.video``: decode only
   what the time-uniform grid needs, seeking on long GOPs, convert only the chosen frames)
   against the naive way (decode every frame to a PIL image, then pick), and against decoding
   every frame without converting any (what any sequential reader pays).
3. **Judge stage**: verdicts per second through ``benchcheck serve --engine scripted`` (answers
   cost nothing, so this is the client path) at judge concurrency 8 and 1 (the naive
   one-at-a-time loop), and a second pass served entirely from the judge cache.

Prints a Markdown table; ``--json`` writes the rows.

    python -m benchmarks.qa_harness --calls 50 --frames 900 --judge-items 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from io import BytesIO
from pathlib import Path
from typing import Any

from benchmarks.shared.timing import best_of

CMD = 'printf \'{"answer": "yes", "model": "m"}\''


def bench_command(calls: int) -> list[dict[str, Any]]:
    from benchcheck.qa.proc import run_with_watchdog

    async def ours_all() -> None:
        # One event loop for the whole run, as ``qa run`` does; the same shell as the floor.
        for _ in range(calls):
            res = await run_with_watchdog(["/bin/sh", "-c", CMD], 30)
            assert res.returncode == 0 and b"yes" in res.stdout

    def bare_all() -> None:
        for _ in range(calls):
            res = subprocess.run(CMD, shell=True, capture_output=True, check=True)
            assert b"yes" in res.stdout

    rows = []
    for name, fn in (("run_with_watchdog (ours)", lambda: asyncio.run(ours_all())),
                     ("subprocess.run (floor)", bare_all)):
        rows.append({"bench": "command call", "variant": name, "ms_per_item": 1000 * best_of(fn, 3) / calls})
    return rows


def bench_frames(n_frames: int, pick: int) -> list[dict[str, Any]]:
    import av
    from PIL import Image

    from benchcheck.qa.frames import sample_jpegs
    from benchcheck.video.synth import make_test_video

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for gop in (30, 250):
            clip = make_test_video(
                Path(d) / f"clip{gop}.mp4", n_frames=n_frames, fps=30.0, width=640, height=360, gop=gop, textured=True
            )

            def ours(clip: Path = clip) -> None:
                assert len(sample_jpegs(clip, pick, 448)) == pick

            def naive(clip: Path = clip) -> None:
                with av.open(str(clip)) as c:
                    images = [f.to_image() for f in c.decode(video=0)]
                for k in range(pick):
                    img = images[int((k + 0.5) * len(images) / pick)]
                    img.thumbnail((448, 448), Image.Resampling.BICUBIC)
                    img.save(BytesIO(), format="JPEG", quality=85)

            def decode_only(clip: Path = clip) -> None:
                with av.open(str(clip)) as c:
                    for _ in c.decode(video=0):
                        pass

            for name, fn in (
                ("sample_jpegs (ours)", ours),
                ("decode all + convert all (naive)", naive),
                ("decode every frame, convert none (reference)", decode_only),
            ):
                fn()
                rows.append(
                    {
                        "bench": f"{pick} of {n_frames} frames, 640x360, GOP {gop}",
                        "variant": name,
                        "ms_per_item": 1000 * best_of(fn, 3),
                    }
                )
        # A clip without B-frames: its packets' pts never go back, so the decode-order check would
        # decode its first frames; the samplers run it for AVI alone (video.decode.by_output_order).
        flat = make_test_video(Path(d) / "flat.mp4", n_frames=n_frames, fps=30.0, width=640, height=360, gop=30,
                               textured=True, bframes=0)
        rows += _order_check_rows(flat, n_frames, pick)
    return rows


def _order_check_rows(clip: Path, n_frames: int, pick: int) -> list[dict[str, Any]]:
    from benchcheck.qa.frames import sample_jpegs
    from benchcheck.video.decode import open_video, pts_in_decode_order, read_packets

    def probed() -> None:
        container, stream = open_video(clip)
        try:
            packets, _ = read_packets(container, stream)
            pts_in_decode_order(stream.codec_context, packets)
        finally:
            container.close()
        sample_jpegs(clip, pick, 448)

    bench = f"{pick} of {n_frames} frames, 640x360, GOP 30, no B-frames"
    return [{"bench": bench, "variant": name, "ms_per_item": 1000 * best_of(fn, 3)}
            for name, fn in (("sample_jpegs (ours: AVI alone checked)", lambda: sample_jpegs(clip, pick, 448)),
                             ("+ decode-order check on every container", probed))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_judge(items: int) -> list[dict[str, Any]]:
    from benchcheck.masking import Masker
    from benchcheck.qa.dataset import QAItem
    from benchcheck.qa.judge import Judge, JudgeConfig
    from benchcheck.qa.state import JudgeCache

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        rules = Path(d) / "rules.json"
        rules.write_text(json.dumps([{"match": "", "reply": '{"score": 1, "reasoning": "Matches the reference."}'}]))
        port = _free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from benchcheck.cli import main; main()",
                "serve",
                "--engine",
                "scripted",
                "--rules",
                str(rules),
                "--model",
                "judge",
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    with urllib.request.urlopen(url + "/health", timeout=1):
                        break
                except OSError:
                    time.sleep(0.1)
            pairs = [
                (QAItem(str(i), f"Question {i}?", "yes", "v.mp4", Path("v.mp4"), ("qa",)), f"answer {i}")
                for i in range(items)
            ]
            for conc in (8, 1):
                out = Path(d) / f"c{conc}"
                out.mkdir()
                for label in ("calls", "cache hits") if conc == 8 else ("calls",):

                    async def once(out: Path = out, conc: int = conc) -> float:
                        judge = Judge(
                            JudgeConfig(url, "judge", concurrency=conc), JudgeCache(out, Masker([])), Masker([])
                        )
                        t0 = time.perf_counter()
                        verdicts = await judge.judge_all(pairs)
                        elapsed = time.perf_counter() - t0
                        await judge.aclose()
                        assert all(v.status == "ok" for v in verdicts)
                        return elapsed

                    elapsed = asyncio.run(once())
                    rows.append(
                        {
                            "bench": f"judge {items} items",
                            "variant": f"concurrency {conc}, {label}",
                            "items_per_s": items / elapsed,
                        }
                    )
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--frames", type=int, default=900)
    ap.add_argument("--pick", type=int, default=8)
    ap.add_argument("--judge-items", type=int, default=200)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = bench_command(args.calls) + bench_frames(args.frames, args.pick) + bench_judge(args.judge_items)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| bench | variant | ms/item | items/s |\n|---|---|---:|---:|")
    for r in rows:
        ms = f"{r['ms_per_item']:.1f}" if "ms_per_item" in r else ""
        ips = f"{r['items_per_s']:.0f}" if "items_per_s" in r else ""
        print(f"| {r['bench']} | {r['variant']} | {ms} | {ips} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
