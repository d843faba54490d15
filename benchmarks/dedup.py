"""Step-0 throughput and quality on a synthetic pool with planted duplicates.

Side by side in one run:
  * ours, cold cache: items/s end to end, recall and precision on the planted duplicates;
  * ours, warm cache: the same pool again (every embedding reused);
  * the encoder alone: bare ``SentenceTransformer.encode`` on a sample of the same texts, the
    limit of the embedding stage (ours cannot embed faster than the model encodes);
  * the naive comparison: every text against every text, no video groups (blocked here; an
    unblocked n x n float32 matrix would need n*n*4 bytes), against our grouped comparison.

    python -m benchmarks.dedup --n 50000 --model minilm
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchcheck.dedup import SentenceEmbedder, dedup_items, default_threshold, resolve_model, text_units
from benchcheck.dedup.synth import score_pool, synthetic_pool


def naive_all_pairs_s(emb: np.ndarray, threshold: float, block: int = 2048) -> tuple[float, int]:
    """Time to compare every row with every row (upper triangle, blocked) and count pairs >= threshold."""
    t0 = time.perf_counter()
    pairs = 0
    for s in range(0, len(emb), block):
        sims = emb[s : s + block] @ emb[s:].T
        pairs += int((np.triu(sims, 1) >= threshold).sum())
    return time.perf_counter() - t0, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--limit-sample", type=int, default=4000, help="texts for the bare-encoder measurement")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args()

    pool = synthetic_pool(args.n, seed=args.seed)
    ref = resolve_model(args.model)
    embedder = SentenceEmbedder(ref, device=args.device, batch_size=args.batch_size)
    threshold = default_threshold(ref) if args.threshold is None else args.threshold
    n = len(pool.items)
    load_start = os.getloadavg()[0]
    embedder.encode(["warm-up text"] * args.batch_size)  # CUDA / thread-pool start-up is not step-0 work
    cache = Path(tempfile.mkdtemp(prefix="dedup_bench_"))
    try:
        t0 = time.perf_counter()
        cold = dedup_items(pool.items, embedder, threshold, cache, progress=True)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = dedup_items(pool.items, embedder, threshold, cache)
        warm_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    score = score_pool(pool, cold.verdicts)
    assert [v.verdict for v in warm.verdicts] == [v.verdict for v in cold.verdicts], "warm run differs"

    texts = [u.text for u in text_units(pool.items)]
    sample = random.Random(args.seed).sample(texts, min(args.limit_sample, len(texts)))
    t0 = time.perf_counter()
    sample_emb = embedder.encode(sample)
    bare_tps = len(sample) / (time.perf_counter() - t0)
    # The naive comparison over all texts: timed on the sample and scaled by (n/sample)^2.
    naive_sample_s, _ = naive_all_pairs_s(sample_emb, threshold)
    naive_s = naive_sample_s * (len(texts) / len(sample)) ** 2

    cpu = platform.processor() or platform.machine()
    import torch

    result = {
        "machine": f"{cpu}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, device {embedder.device}",
        "command": f"python -m benchmarks.dedup --n {args.n} --model {args.model}",
        "load_average_1min_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "model": cold.model,
        "threshold": threshold,
        "items": n,
        "distinct_texts": len(texts),
        "embedded_texts": cold.stats.encoded,
        "cold_s": round(cold_s, 2),
        "cold_items_per_s": round(n / cold_s, 1),
        "cold_embed_s": round(cold.stats.embed_s, 2),
        "embed_texts_per_s": round(cold.stats.encoded / cold.stats.embed_s, 1),
        "bare_encoder_texts_per_s": round(bare_tps, 1),
        "compare_s": round(cold.stats.compare_s, 3),
        "groups": cold.stats.groups,
        "largest_group": cold.stats.largest_group,
        "naive_all_pairs_compare_s_est": round(naive_s, 1),
        "naive_unblocked_matrix_gib": round(len(texts) ** 2 * 4 / 2**30, 1),
        "warm_s": round(warm_s, 2),
        "warm_items_per_s": round(n / warm_s, 1),
        "warm_reused": warm.stats.reused,
        "warm_encoded": warm.stats.encoded,
        "planted": score.planted,
        "found": score.found,
        "removed": score.removed,
        "recall": round(score.recall, 4),
        "precision": round(score.precision, 4),
        "recall_by_kind": {k: round(v, 4) for k, v in score.recall_by_kind.items()},
        "must_keep": len(pool.must_keep),
        "must_keep_removed": score.must_keep_removed,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
