"""The probe's embedding model: the step-0 sentence-transformers loader (``dedup.model``) behind
the probe's content-addressed cache."""

from __future__ import annotations

from pathlib import Path

from benchcheck.dedup.model import SentenceEmbedder, resolve_model
from benchcheck.probe.embeddings import EmbeddingCache
from benchcheck.probe.run import TextEmbedder

NO_MODEL = "none"


def text_embedder(model: str, cache: str | Path, revision: str | None = None, device: str = "cpu",
                  batch_size: int = 64, loaded: SentenceEmbedder | None = None) -> TextEmbedder | None:
    """None for ``model == "none"`` (hand features only); raises ``DedupError`` when the model
    cannot load. ``loaded`` reuses a model already in memory (the demo's step 0)."""
    if model == NO_MODEL:
        return None
    enc = loaded if loaded is not None else SentenceEmbedder(resolve_model(model, revision), device, batch_size)
    return TextEmbedder(enc.name, EmbeddingCache(cache, enc.name, enc.fingerprint), enc.encode)
