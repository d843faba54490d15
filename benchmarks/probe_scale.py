"""The probe at scale: a synthetic pool (default 300,000 items in 10 benchmarks) with its
embeddings already in the content-addressed cache, and the packaged MiniLM's encoding rate on a
sample (docs/probe.md, "Scale").

Every text is unique (an item's number is appended to its question and options, the same to each
option so the planted length pattern holds), so the cache holds about 5 rows per item. The cache
is filled with deterministic unit vectors through ``EmbeddingCache.add`` (what an encoding run
writes), then the probe runs with an encoder that refuses to be called: the cached path only.
Prints wall time, CPU seconds and peak RSS per phase.

    PYTHONPATH=src python benchmarks/probe_scale.py [--items 300000] [--benches 10] [--permutations 19]
                                                    [--sample 2000] [--no-minilm]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import resource
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchcheck.items import Item
from benchcheck.probe.embeddings import EmbeddingCache, text_key
from benchcheck.probe.run import ProbeConfig, TextEmbedder, run_probe
from benchcheck.probe.synth import PATTERNS, pattern_items

DIM = 384


def _rss() -> float:
    """This phase's peak RSS in MiB: VmHWM, reset at the phase's start (Linux), else the process's."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass


class Phase:
    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> Phase:
        _reset_peak()
        self.w, self.c = time.time(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        print(f"{self.name:<34} wall {time.time() - self.w:8.1f} s  CPU {time.process_time() - self.c:8.1f} s  "
              f"peak RSS {_rss():7.0f} MiB", flush=True)


def pool(n: int, benches: int) -> list[Item]:
    out: list[Item] = []
    per = n // benches
    for b in range(benches):
        pattern = PATTERNS[b % len(PATTERNS)]
        for it in pattern_items(pattern, per, seed=b, bench=f"Scale{b}", strength=0.3):
            i = len(out)
            out.append(replace(it, question=f"{it.question} (clip {i})",
                               options=tuple(f"{o} #{i}" for o in it.options)))
    return out


def _vectors(keys: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(int(keys[0] % 2**32) if len(keys) else 0)
    v = rng.standard_normal((len(keys), DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def refuse(texts: Sequence[str]) -> np.ndarray:
    raise AssertionError(f"the cached path encoded {len(texts)} texts")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=300_000)
    ap.add_argument("--benches", type=int, default=10)
    ap.add_argument("--permutations", type=int, default=19)
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--no-minilm", action="store_true")
    ap.add_argument("--no-ibp", action="store_true")
    a = ap.parse_args()
    print(f"# probe_scale {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{a.items} items in {a.benches} benchmarks, {a.permutations} permutations (uniform null), "
          f"IBP {'off' if a.no_ibp else 'on'}")
    with Phase("build the synthetic pool"):
        items = pool(a.items, a.benches)
    with tempfile.TemporaryDirectory() as tmp:
        fp = "synthetic-unit-vectors"
        with Phase("fill the cache (1 pass, all texts)"):
            cache = EmbeddingCache(tmp, "synthetic", fp, DIM)
            for start in range(0, len(items), 10_000):
                texts = [t for it in items[start:start + 10_000] for t in (it.question, *it.options)]
                keys = np.unique(np.array([text_key(fp, t) for t in texts], dtype=np.uint64))
                cache.add(keys, _vectors(keys))
        emb = TextEmbedder("synthetic", EmbeddingCache(tmp, "synthetic", fp, DIM), refuse)
        cfg = ProbeConfig(permutations=a.permutations, shuffle_null=False, ibp=not a.no_ibp)
        with Phase("probe (cached embeddings)"):
            res = run_probe(items, cfg, emb, echo=lambda line: print("  " + line, flush=True))
        print(f"  reused {res.embed.reused} rows, encoded {res.embed.encoded}; cache on disk "
              f"{sum(p.stat().st_size for p in Path(tmp).rglob('*.npy')) / 2**20:.0f} MiB")
    if not a.no_minilm:
        from benchcheck.probe.embedder import text_embedder

        sample = [t for it in items[:a.sample // 5 + 1] for t in (it.question, *it.options)][:a.sample]
        with tempfile.TemporaryDirectory() as tmp:
            with Phase("load MiniLM"):
                enc = text_embedder("minilm", tmp)
            assert enc is not None
            t0, c0 = time.time(), time.process_time()
            enc.encode(sample)
            wall, cpu = time.time() - t0, time.process_time() - c0
            texts = 5 * a.items
            print(f"MiniLM on CPU: {len(sample)} texts in {wall:.1f} s wall ({len(sample) / wall:.0f} texts/s), "
                  f"{cpu:.1f} s CPU; {texts} texts ({a.items} items x 5) would take "
                  f"{texts / (len(sample) / wall) / 3600:.1f} h at this rate")


if __name__ == "__main__":
    main()
