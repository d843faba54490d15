"""Step 0 on a real two-benchmark pool with the packaged embedding model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dedup_fixtures import EXPECTED, CountingEmbedder

from benchcheck.dedup import (
    DedupError,
    SentenceEmbedder,
    dedup_items,
    default_threshold,
    resolve_model,
    write_outputs,
)
from benchcheck.dedup.model import DEFAULT_MODEL, DEFAULT_REVISION, Embeddings, ModelRef, packaged_minilm_dir
from benchcheck.items import load_items


def verdict_map(result: object) -> dict[str, tuple[str, str | None, str | None]]:
    return {v.item.item_id: (v.verdict, v.duplicate_of.item_id if v.duplicate_of else None, v.kind)
            for v in result.verdicts}  # type: ignore[attr-defined]


def test_planted_duplicates_found_and_lookalikes_kept(pool_files: tuple[Path, Path], minilm: SentenceEmbedder,
                                                      tmp_path: Path) -> None:
    items = load_items(pool_files).items
    result = dedup_items(items, minilm, 0.95, tmp_path / "cache")
    got = verdict_map(result)
    assert {k: v for k, v in got.items() if v[0] != "kept"} == EXPECTED
    for kept in ("alpha_1", "alpha_4", "alpha_5", "alpha_6", "alpha_7", "alpha_10", "beta_4", "beta_5"):
        assert got[kept] == ("kept", None, None)
    near = {v.item.item_id: v.similarity for v in result.verdicts if v.verdict == "near"}
    assert all(0.95 <= s < 1.0 for s in near.values() if s is not None), near


def test_benchmark_order_decides_which_copy_is_kept(pool_files: tuple[Path, Path], minilm: SentenceEmbedder,
                                                    tmp_path: Path) -> None:
    alpha, beta = pool_files
    got = verdict_map(dedup_items(load_items([beta, alpha]).items, minilm, 0.95, tmp_path / "cache"))
    assert got["alpha_5"] == ("exact", "beta_1", "cross")
    assert got["alpha_10"] == ("near", "beta_2", "cross")
    assert got["beta_1"][0] == got["beta_2"][0] == "kept"


def test_cache_reused_when_unchanged_and_refreshed_per_item(pool_files: tuple[Path, Path],
                                                            minilm: SentenceEmbedder, tmp_path: Path) -> None:
    alpha = pool_files[0]
    cache = tmp_path / "cache"
    first = CountingEmbedder(minilm)
    r1 = dedup_items(load_items(pool_files).items, first, 0.95, cache)
    assert r1.stats.encoded == len(first.texts) > 0 and r1.stats.reused == 0
    assert sorted(p.name for p in cache.iterdir()) == [f"minilm-{minilm.fingerprint[:12]}"]
    assert len(list(cache.rglob("ids.json"))) == 2 and len(list(cache.rglob("emb-*.npy"))) == 2

    second = CountingEmbedder(minilm)
    r2 = dedup_items(load_items(pool_files).items, second, 0.95, cache)
    assert second.texts == [] and r2.stats.reused == r1.stats.encoded
    assert verdict_map(r2) == verdict_map(r1)

    # One edited item: only its text is encoded again.
    text = alpha.read_text().replace("What does the man hold in his hand?", "What does the man grip in his hand?")
    alpha.write_text(text)
    third = CountingEmbedder(minilm)
    dedup_items(load_items(pool_files).items, third, 0.95, cache)
    assert third.texts == ["What does the man grip in his hand?\na phone\na cup\na pen\na book"]

    # Another model (another fingerprint) never reads this model's rows.
    other = CountingEmbedder(minilm, fingerprint="0" * 64)
    dedup_items(load_items(pool_files).items, other, 0.95, cache)
    assert len(other.texts) == r1.stats.encoded


def test_outputs(pool_files: tuple[Path, Path], minilm: SentenceEmbedder, tmp_path: Path) -> None:
    result = dedup_items(load_items(pool_files).items, minilm, 0.95, tmp_path / "cache")
    out = tmp_path / "out"
    paths = write_outputs(result, out)
    assert [p.name for p in paths] == ["step0_removed.jsonl", "screen_counts_full.csv", "step0_summary.md",
                                       "step0_kept.parquet"]
    table = pq.read_table(out / "step0_kept.parquet")
    assert table.column_names == ["item_id", "bench", "video_id", "kept", "verdict", "duplicate_of", "similarity",
                                  "kind"]
    rows = {r["item_id"]: r for r in table.to_pylist()}
    assert len(rows) == 14 and sum(r["kept"] for r in rows.values()) == 8
    assert rows["beta_3"] == {"item_id": "beta_3", "bench": "beta", "video_id": None, "kept": False,
                              "verdict": "exact", "duplicate_of": "alpha_7", "similarity": 1.0, "kind": "cross"}
    removed = [json.loads(line) for line in (out / "step0_removed.jsonl").read_text().splitlines()]
    assert {r["item_id"]: (r["verdict"], r["duplicate_of"], r["kind"]) for r in removed} == EXPECTED
    near = next(r for r in removed if r["item_id"] == "beta_2")
    assert near["duplicate_bench"] == "alpha" and near["text"].startswith("How many people are shown")
    assert (out / "screen_counts_full.csv").read_text().splitlines() == [
        "bench,items,exact,near,cross_bench,kept,gold_conflict", "alpha,9,1,2,0,6,0", "beta,5,2,1,3,2,0"]
    summary = (out / "step0_summary.md").read_text()
    for heading in ("Exact duplicates, within a benchmark", "Exact duplicates across benchmarks",
                    "Near duplicates, within a benchmark", "Near duplicates across benchmarks"):
        assert f"## {heading}" in summary
    # A rerun writes the same bytes (what a killed-and-restarted run relies on).
    before = {p.name: p.read_bytes() for p in paths}
    write_outputs(dedup_items(load_items(pool_files).items, minilm, 0.95, tmp_path / "cache"), out)
    assert {p.name: p.read_bytes() for p in paths} == before


def test_local_folder_model_and_model_names(tmp_path: Path) -> None:
    folder = packaged_minilm_dir()
    ref = resolve_model(str(folder))
    assert ref == ModelRef(str(folder.resolve()), None, True)
    emb = SentenceEmbedder(ref, device="cpu")
    vecs = emb.encode(["What is the man holding?", "What does the man hold?"])
    assert vecs.shape == (2, 384) and abs(float(vecs[0] @ vecs[0]) - 1.0) < 1e-5
    assert default_threshold(ref) == 0.95
    assert resolve_model(DEFAULT_MODEL) == ModelRef(DEFAULT_MODEL, DEFAULT_REVISION, False)
    assert default_threshold(resolve_model(DEFAULT_MODEL)) == 0.96
    snapshot = tmp_path / "d4aa6901"
    snapshot.mkdir()
    (snapshot / "README.md").write_text("# BAAI/bge-large-en-v1.5\n")
    assert default_threshold(resolve_model(str(snapshot))) == 0.96
    with pytest.raises(DedupError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"))


class Interrupted(Exception):
    pass


class DiesAfter(CountingEmbedder):
    """The real model, killed (an exception) on its n-th encode call, as a run killed mid-way."""

    def __init__(self, inner: SentenceEmbedder, calls: int) -> None:
        super().__init__(inner)
        self.calls_left = calls

    def encode(self, texts: Sequence[str]) -> Embeddings:
        self.calls_left -= 1
        if self.calls_left < 0:
            raise Interrupted
        return super().encode(texts)


def test_killed_run_resumes_from_checkpoints(pool_files: tuple[Path, Path], minilm: SentenceEmbedder,
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchcheck.dedup.run as run

    items = load_items(pool_files).items
    clean = dedup_items(items, CountingEmbedder(minilm), 0.95, tmp_path / "clean")
    monkeypatch.setattr(run, "ENCODE_CHUNK", 2)
    monkeypatch.setattr(run, "SAVE_EVERY", 2)
    dying = DiesAfter(minilm, calls=3)
    with pytest.raises(Interrupted):
        dedup_items(items, dying, 0.95, tmp_path / "cache")
    assert len(dying.texts) == 6
    resumed = CountingEmbedder(minilm)
    result = dedup_items(items, resumed, 0.95, tmp_path / "cache")
    assert result.stats.reused == 6 and len(resumed.texts) == clean.stats.encoded - 6
    assert verdict_map(result) == verdict_map(clean)
