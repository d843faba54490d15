"""Step 0: exact and near-duplicate items across a pool of benchmarks.

``dedup_items`` decides a verdict per item; ``write_outputs`` writes ``step0_kept.parquet``
(read by ``screen --keep``), ``step0_removed.jsonl``, ``screen_counts_full.csv`` and
``step0_summary.md``. Embeddings come from any :class:`Embedder`; :class:`SentenceEmbedder`
wraps sentence-transformers and is loaded from :func:`resolve_model`.
"""

from benchcheck.dedup.compare import GroupMatches, greedy_matches
from benchcheck.dedup.model import (
    DEFAULT_MODEL,
    DEFAULT_REVISION,
    MINILM_ALIAS,
    DedupError,
    Embedder,
    ModelRef,
    SentenceEmbedder,
    default_threshold,
    resolve_model,
)
from benchcheck.dedup.outputs import BenchCounts, bench_counts, write_outputs
from benchcheck.dedup.run import DedupResult, DedupStats, dedup_items
from benchcheck.dedup.units import TextUnit, guard_signature, priority_order, text_units
from benchcheck.dedup.verdict import ItemVerdict

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_REVISION",
    "MINILM_ALIAS",
    "BenchCounts",
    "DedupError",
    "DedupResult",
    "DedupStats",
    "Embedder",
    "GroupMatches",
    "ItemVerdict",
    "ModelRef",
    "SentenceEmbedder",
    "TextUnit",
    "bench_counts",
    "dedup_items",
    "default_threshold",
    "greedy_matches",
    "guard_signature",
    "priority_order",
    "resolve_model",
    "text_units",
    "write_outputs",
]
