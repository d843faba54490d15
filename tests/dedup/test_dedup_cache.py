"""The per-benchmark embedding cache: reuse, invalidation, crash safety, safe folder names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchcheck.dedup.cache import BenchCache, bench_dir_name, text_hash


def vec(x: float) -> np.ndarray:
    return np.array([x, 1.0 - x], dtype=np.float32)


def test_save_reopen_and_text_hash_invalidation(tmp_path: Path) -> None:
    c = BenchCache.open(tmp_path, "m-1", "B", "m", "fp1")
    assert c.lookup("q1", text_hash("t1")) is None
    c.save({"q1": (text_hash("t1"), vec(0.1)), "q2": (text_hash("t2"), vec(0.2))})
    again = BenchCache.open(tmp_path, "m-1", "B", "m", "fp1")
    np.testing.assert_array_equal(again.lookup("q1", text_hash("t1")), vec(0.1))
    assert again.lookup("q1", text_hash("edited")) is None  # changed item text
    assert BenchCache.open(tmp_path, "m-1", "B", "m", "other-fp").lookup("q1", text_hash("t1")) is None
    # A later save carries forward only the ids it is told to keep.
    again.save({"q3": (text_hash("t3"), vec(0.3))}, keep=["q2"])
    third = BenchCache.open(tmp_path, "m-1", "B", "m", "fp1")
    assert sorted(third.rows) == ["q2", "q3"]
    assert len(list(third.folder.glob("emb-*.npy"))) == 1


def test_kill_between_writes_and_torn_index(tmp_path: Path) -> None:
    c = BenchCache.open(tmp_path, "m-1", "B", "m", "fp1")
    c.save({"q1": (text_hash("t1"), vec(0.1))})
    # A run killed after writing its new .npy but before replacing ids.json: the old pair stands.
    np.save(c.folder / "emb-deadbeefdeadbeef.npy", np.zeros((5, 2), dtype=np.float32))
    np.testing.assert_array_equal(BenchCache.open(tmp_path, "m-1", "B", "m", "fp1").lookup("q1", text_hash("t1")),
                                  vec(0.1))
    # A torn or mismatched index reads as an empty cache (everything is re-encoded), never a crash.
    (c.folder / "ids.json").write_text('{"schema_version": 1, "fingerprint": "fp1", "ids": ["q1"')
    assert BenchCache.open(tmp_path, "m-1", "B", "m", "fp1").matrix is None
    meta = {"schema_version": 1, "fingerprint": "fp1", "npy": "emb-deadbeefdeadbeef.npy", "ids": ["q1"],
            "text_hashes": [text_hash("t1")]}
    (c.folder / "ids.json").write_text(json.dumps(meta))
    assert BenchCache.open(tmp_path, "m-1", "B", "m", "fp1").matrix is None


def test_bench_names_cannot_escape_the_cache(tmp_path: Path) -> None:
    for bench in ("../../etc", "/abs/path", "..", "a/b"):
        name = bench_dir_name(bench)
        assert "/" not in name and name not in (".", "..")
        c = BenchCache.open(tmp_path, "m-1", bench, "m", "fp")
        c.save({"q": (text_hash("t"), vec(0.5))})
        assert c.folder.resolve().is_relative_to(tmp_path.resolve())
    assert bench_dir_name("a/b") != bench_dir_name("a_b")
