"""Issue 38, point 5: an export names the video each item came with (a path, a URL, the source file of a
store key), not the normalized re-encode; ``--video-source store`` asks for the re-encode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from import_helpers import export, invoke, screen_step1, write_jsonl

from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("vids")
    raw = root / "raw"
    make_test_video(raw / "c.mp4", n_frames=6, fps=2, width=64, height=48)
    make_test_video(raw / "d.mp4", n_frames=9, fps=2, width=64, height=48)
    store = root / "store"
    report = normalize_videos([raw], store, workers=1, progress=False)
    assert not report.failures
    index = {json.loads(x)["key"]: json.loads(x) for x in (store / "index.jsonl").read_text().splitlines()}
    d_hash = index["local::raw::d.mp4"]["content_hash"]
    opts = {"question": "Which?", "options": ["a", "b", "c"], "answer": 1}
    items = write_jsonl(root / "items" / "V.jsonl", [
        {"item_id": "path", "video": "clips/a.mp4", **opts},
        {"item_id": "url", "video": "https://example.org/v/b.mp4", **opts},
        {"item_id": "key", "video": "local::raw::c.mp4", **opts},
        {"item_id": "hash", "video_id": d_hash, **opts},
        {"item_id": "none", **opts},
    ])
    results = root / "results"
    screen_step1(items, results, root)
    expect = {"path": "clips/a.mp4", "url": "https://example.org/v/b.mp4",
              "key": index["local::raw::c.mp4"]["source"], "hash": index["local::raw::d.mp4"]["source"]}
    return items, results, store, expect


def _videos_parquet(out: Path) -> dict[str, str | None]:
    import pyarrow.parquet as pq

    rows = pq.read_table(next(out.glob("data/*/*.parquet"))).to_pylist()
    return {r["item_id"]: r["video"] for r in rows}


def test_exports_name_the_original_videos(bench: tuple[Path, Path, Path, dict[str, str]], tmp_path: Path) -> None:
    items, results, store, expect = bench
    export(results, items, "parquet", tmp_path / "pq", "--store", str(store))
    got = _videos_parquet(tmp_path / "pq")
    assert got == {**expect, "none": None}
    assert not any("normalized" in str(v) for v in got.values())
    # the same names in the lmms-eval documents and the VLMEvalKit TSV
    export(results, items, "lmms-eval", tmp_path / "lm", "--store", str(store))
    docs = [json.loads(x) for x in next((tmp_path / "lm").glob("*.jsonl")).read_text().splitlines()]
    assert {d["item_id"]: d["video"] for d in docs} == {**expect, "none": None}
    export(results, items, "vlmevalkit", tmp_path / "tsv", "--store", str(store))
    import csv

    with next((tmp_path / "tsv").glob("*.tsv")).open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert {r["item_id"]: r["video"] for r in rows} == {**expect, "none": ""}


def test_without_the_store_a_key_stays_and_a_bare_id_is_named_in_a_note(
        bench: tuple[Path, Path, Path, dict[str, str]], tmp_path: Path) -> None:
    items, results, _, expect = bench
    r = export(results, items, "parquet", tmp_path)
    got = _videos_parquet(tmp_path)
    assert got == {**expect, "key": "local::raw::c.mp4", "hash": None, "none": None}
    assert "note: 1 item has an empty video (only a video_id: give --store" in r.output


def test_video_source_store_writes_the_normalized_files(bench: tuple[Path, Path, Path, dict[str, str]],
                                                        tmp_path: Path) -> None:
    items, results, store, _ = bench
    r = export(results, items, "parquet", tmp_path, "--store", str(store), "--video-source", "store")
    got = _videos_parquet(tmp_path)
    for iid in ("key", "hash"):
        p = Path(str(got[iid]))
        assert p.is_absolute() and p.is_file() and p.parent.parent == (store / "normalized").resolve()
    assert got["path"] is None and got["url"] is None
    assert "note: 2 items have an empty video (no normalized video in --store)" in r.output


def test_video_source_store_needs_the_store(bench: tuple[Path, Path, Path, dict[str, str]], tmp_path: Path) -> None:
    items, results, _, _ = bench
    r = invoke("export", "--results", str(results), "--items", str(items), "--format", "parquet", "--chain", "1",
               "--out", str(tmp_path), "--video-source", "store")
    assert r.exit_code == 2 and "--video-source store needs --store" in r.output


def test_a_store_that_does_not_exist_is_refused(bench: tuple[Path, Path, Path, dict[str, str]], tmp_path: Path) -> None:
    """A mistyped --store exported every item with exit 0, naming files under the missing folder
    (--video-source store) or no source files at all (original)."""
    items, results, store, _ = bench
    typo = store.parent / "stor"
    for source in ("store", "original"):
        r = invoke("export", "--results", str(results), "--items", str(items), "--format", "parquet", "--chain", "1",
                   "--out", str(tmp_path / source), "--store", str(typo), "--video-source", source)
        assert r.exit_code == 2 and "--store" in r.output and str(typo) in r.output, r.output
        assert not (tmp_path / source).exists()
