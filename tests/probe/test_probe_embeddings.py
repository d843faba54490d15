"""The content-addressed embedding cache: a text is encoded once per model, whatever item or
benchmark asks; a torn part is ignored; the packaged MiniLM feeds the probe."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from benchcheck.probe import embeddings as em
from benchcheck.probe.embeddings import EmbeddingCache, embed


class Counting:
    """A deterministic encoder (a hash of the text as a unit vector) that counts what it encodes."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += list(texts)
        out = np.stack([np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(8) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def test_each_text_encoded_once_and_reused(tmp_path: Path) -> None:
    enc = Counting()
    cache = EmbeddingCache(tmp_path, "m", "fp1")
    texts = ["red", "blue", "What colour?", "red", "blue"]
    rows, st = embed(texts, cache, enc)
    assert st.encoded == 3 and sorted(enc.seen) == ["What colour?", "blue", "red"]
    assert st.reused == 2  # "red" and "blue" again: every text is counted, encoded or reused
    assert np.allclose(rows[0], rows[3]) and np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-3)
    again, st2 = embed(["blue", "green", "red"], EmbeddingCache(tmp_path, "m", "fp1"), enc)
    assert st2.encoded == 1 and st2.reused == 2 and enc.seen[-1] == "green"
    assert np.allclose(again[0], rows[1], atol=1e-3) and np.allclose(again[2], rows[0], atol=1e-3)
    _other, st3 = embed(["red"], EmbeddingCache(tmp_path, "m", "fp2"), enc)  # another model: another address
    assert st3.encoded == 1


def test_a_torn_part_is_ignored(tmp_path: Path) -> None:
    enc = Counting()
    cache = EmbeddingCache(tmp_path, "m", "fp")
    embed(["a", "b", "c"], cache, enc)
    for kf in cache.folder.glob("b*/keys-*.npy"):  # a write killed between the rows and the keys
        kf.unlink()
    _, st = embed(["a", "b", "c"], EmbeddingCache(tmp_path, "m", "fp"), enc)
    assert st.encoded == 3


def test_parts_are_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(em, "BUCKETS", 16)
    enc = Counting()
    texts = [f"text {i}" for i in range(400)]
    for i in range(0, 400, 20):  # 20 runs, each adding a few rows to most buckets
        embed(texts[i:i + 20], EmbeddingCache(tmp_path, "m", "fp"), enc)
    cache = EmbeddingCache(tmp_path, "m", "fp")
    assert all(len(list(d.glob("keys-*.npy"))) <= em.MAX_PARTS + 1 for d in cache.folder.iterdir())
    rows, st = embed(texts, cache, enc)
    assert st.encoded == 0 and st.reused == 400
    assert np.allclose(rows, Counting()(texts), atol=2e-3)


def test_packaged_minilm_feeds_the_probe(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    from benchcheck.probe.embedder import text_embedder
    from benchcheck.probe.run import ProbeConfig, run_probe
    from benchcheck.probe.synth import pattern_items

    emb = text_embedder("minilm", tmp_path)
    assert emb is not None
    items = pattern_items("shared_word", 24, seed=0)
    res = run_probe(items, ProbeConfig(permutations=0, ibp=False, min_items=10), emb)
    assert res.embed.encoded > 0 and "cos_q" in res.features and "proj_0" in res.features
    assert res.benches[0].accuracy is not None and res.benches[0].accuracy > 0.5
    again = run_probe(items, ProbeConfig(permutations=0, ibp=False, min_items=10), emb)
    assert again.embed.encoded == 0 and again.items == res.items
