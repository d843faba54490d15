"""How much the hf engine's encoding slows the thread that launches device work (Python's lock).

The launching thread's pattern is thousands of short calls into C, each releasing and taking back
Python's lock. Here that is a loop of small in-place torch ops, timed alone and while other threads
encode requests the ways the engine did and does:

  text, one by one      render, the Rust tokenizer's single-text ``encode``, arrays (the engine before)
  text, batch call      ``encode_batch`` of 64 texts (releases the lock while it works)
  text, engine blocks   ``HFEngine._encode`` on blocks of 64 requests (render, tokenize, arrays)
  32 frames, threads    ``HFEngine._encode`` of 32-frame requests, images decoded in the thread
  32 frames, processes  the same with images decoded in 2 worker processes (``hf_decode``), their
                        frames piped back (before) or left in shared memory (now)

Run:  PYTHONPATH=src python benchmarks/lock_probe.py   (CPU, the tiny model's tokenizer)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.schedule.pipeline import Job
from benchcheck.testing import build_tiny_model
from engine_throughput import jpeg
from gpu_screen import step1, synthetic_items, visual


def op_latency_us(n: int = 3000) -> float:
    x = torch.zeros(4)
    t = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    return (time.perf_counter() - t) / n * 1e6


def with_workers(work: Callable[[], None], threads: int) -> float:
    """The launching pattern's microseconds an op while ``threads`` threads loop over ``work``."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            work()

    running = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for t in running:
        t.start()
    time.sleep(0.2)  # the workers under way
    try:
        return op_latency_us()
    finally:
        stop.set()
        for t in running:
            t.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="encoding threads (the engine's default: 2)")
    args = ap.parse_args()
    engine = HFEngine(build_tiny_model(Path(tempfile.mkdtemp()) / "tiny"), device="cpu")
    enc = engine.encoder
    backend = enc.tokenizer.backend_tokenizer
    text = step1(synthetic_items(64, 50))
    texts = [enc.render(r.prompt, 0, r.assistant_prefix) for r in text]
    jobs = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, None, 1) for r in text]
    frames = [jpeg(s) for s in range(32)]
    video = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, None, 1)
             for r in visual(synthetic_items(2, 30, 4), 3, frames, 32)]

    def one_by_one() -> None:  # the engine's encoding of a text request before: render, encode, arrays
        for r in text:
            ids = np.asarray(backend.encode(enc.render(r.prompt, 0, r.assistant_prefix), add_special_tokens=False).ids)
            np.zeros_like(ids)

    def video_jobs() -> None:
        for j in video:
            engine._encode([j])

    cases: list[tuple[str, Callable[[], None]]] = [
        ("text, one by one (before)", one_by_one),
        ("text, batch call", lambda: backend.encode_batch(texts, add_special_tokens=False)),
        ("text, engine blocks (ours)", lambda: engine._encode(jobs)),
        ("32 frames, decoded in threads (before)", video_jobs),
    ]
    print(f"{'encoding threads doing':42s} {'us an op':>9s}  vs alone", flush=True)
    alone = op_latency_us()
    print(f"{'nothing (alone)':42s} {alone:9.1f}  1.0x", flush=True)
    for name, work in cases:
        v = with_workers(work, args.threads)
        print(f"{name:42s} {v:9.1f}  {v / alone:.1f}x", flush=True)
    enc.decoder.processes = 2
    shared = enc.decoder.shared
    try:
        video_jobs()  # the workers started
        for label, through_memory in (("frames piped (before)", False), ("frames in shared memory (ours)", True)):
            if through_memory and not shared:
                print(f"{'32 frames, 2 workers, ' + label:42s}  skipped: no room in /dev/shm", flush=True)
                continue
            enc.decoder.shared = through_memory
            v = with_workers(video_jobs, args.threads)
            print(f"{'32 frames, 2 workers, ' + label:42s} {v:9.1f}  {v / alone:.1f}x", flush=True)
    finally:
        enc.decoder.close()


if __name__ == "__main__":
    main()
