"""Issue 38: import from VLMEvalKit, lmms-eval and a Hugging Face datasets folder; each round-trips this
project's own export: export -> import -> the same items (ids, benchmark, question, options, gold,
video, task, duration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from import_helpers import export, invoke, screen_step1, write_jsonl

from benchcheck.items import Item, load_items

# Text that breaks naive writers and readers: tabs, newlines, quotes, YAML-looking text, numbers as options.
ROWS: list[dict[str, Any]] = [
    {"item_id": "tab", "question": 'What color is the "tab"\tcar?', "options": ["red", "blue\tgreen", "#fff"],
     "answer": 0, "video": "clips/a b.mp4", "task": "color", "duration_s": 12.5},
    {"item_id": "lines", "question": "Line one\nline two: which?", "options": ['say "yes"', "no", "maybe, later",
                                                                              "café"], "answer": 2,
     "video": "https://example.org/v/b.mp4"},
    {"item_id": "yaml", "question": "- a YAML-looking question: true", "options": ["1e3", "- x", "{a: 1}"],
     "answer": 1, "video": "clips/c.mp4", "task": "odd"},
    {"item_id": "count", "question": "How many kites?", "options": ["3", "5", "7", "9"], "answer": "5"},
    {"item_id": "letters", "question": "Which letter?", "options": ["B", "A", "C"], "answer": "A",
     "duration_s": 3.0},
] + [{"item_id": f"plain_{i}", "question": f"Question {i}?", "options": [f"o{i}{j}" for j in range(2 + i % 4)],
      "answer": i % 2, "video": f"clips/{i}.mp4", "task": "t"} for i in range(8)]


@pytest.fixture(scope="module")
def screened(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Item]]:
    root = tmp_path_factory.mktemp("rt")
    items = write_jsonl(root / "items" / "Mine.jsonl", ROWS)
    other = write_jsonl(root / "items" / "Other.jsonl", [
        {"item_id": f"other_{i}", "question": "Q?", "options": ["x", "y", "z"], "answer": 2} for i in range(3)])
    results = root / "results"
    screen_step1(root / "items", results, root)
    loaded = load_items([items, other])
    assert not loaded.problems
    return root / "items", results, {i.item_id: i for i in loaded.items}


def _same(imported: list[Item], original: dict[str, Item]) -> None:
    for it in imported:
        want = original[it.item_id]
        assert it == want, (it, want)  # the record's identity: id, bench, question, options, gold, video id, ...
        assert it.meta.get("video_key") == want.meta.get("video_key")


def _import(src: Path, fmt: str, out: Path, *extra: str) -> list[Item]:
    r = invoke("items", "import", str(src), "--from", fmt, "--out", str(out), *extra)
    assert r.exit_code == 0, r.output
    assert "bad item" not in r.output, r.output
    loaded = load_items([out])  # what later commands read: the written item files
    assert not loaded.errors, loaded.errors
    return loaded.items


def test_vlmevalkit_tsv_round_trip(screened: tuple[Path, Path, dict[str, Item]], tmp_path: Path) -> None:
    items, results, original = screened
    export(results, items, "vlmevalkit", tmp_path / "tsv")
    left = {json.loads(x)["item_id"] for f in (tmp_path / "tsv").glob("*.left_out.jsonl")
            for x in f.read_text().splitlines()}
    got = _import(tmp_path / "tsv", "vlmevalkit", tmp_path / "items")
    _same(got, original)
    assert {i.item_id for i in got} | left == set(original) and left <= {"count"}


def test_lmms_eval_task_round_trip(screened: tuple[Path, Path, dict[str, Item]], tmp_path: Path) -> None:
    """Through the group YAML (each task's YAML found by name), lmms-eval's own loader and our utils.py."""
    items, results, original = screened
    export(results, items, "lmms-eval", tmp_path / "lm")
    got = _import(tmp_path / "lm" / "_benchcheck_kept.yaml", "lmms-eval", tmp_path / "items")
    _same(got, original)
    assert {i.item_id for i in got} == set(original)


def test_lmms_eval_without_lmms_eval_installed_reads_the_same(screened: tuple[Path, Path, dict[str, Item]],
                                                              tmp_path: Path) -> None:
    from benchcheck.items.importers import to_items
    from benchcheck.items.importers.lmms_eval import read_task

    items, results, original = screened
    export(results, items, "lmms-eval", tmp_path / "lm")
    ours = to_items(read_task(tmp_path / "lm", use_lmms_eval=False))
    theirs = to_items(read_task(tmp_path / "lm"))
    assert not ours.problems and ours.items == theirs.items
    _same(ours.items, original)


def test_hf_folder_round_trip_hub_layout(screened: tuple[Path, Path, dict[str, Item]], tmp_path: Path) -> None:
    items, results, original = screened
    export(results, items, "parquet", tmp_path / "pq")
    got = _import(tmp_path / "pq", "hf-folder", tmp_path / "items")
    _same(got, original)
    assert {i.item_id for i in got} == set(original)


def _save_to_disk(table: Any, folder: Path, split: str | None, features: dict[str, Any]) -> None:
    """The layout ``datasets``' ``Dataset.save_to_disk`` writes: Arrow stream shards, state.json, dataset_info.json."""
    import pyarrow as pa

    folder.mkdir(parents=True)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, \
            pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    (folder / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_fingerprint": "0", "_format_columns": None,
        "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": split}))
    (folder / "dataset_info.json").write_text(json.dumps({"citation": "", "description": "", "features": features}))


def test_hf_folder_round_trip_save_to_disk(screened: tuple[Path, Path, dict[str, Item]], tmp_path: Path) -> None:
    """The parquet export re-saved as a DatasetDict (train + test), with the gold as a ClassLabel of letters
    and the video as a Video feature ({"path", "bytes"}), read without ``datasets``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    items, results, original = screened
    export(results, items, "parquet", tmp_path / "pq")
    rows = [r for f in sorted((tmp_path / "pq" / "data").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    for r in rows:
        r["gold"] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".index(r.pop("answer_letter"))
        r["clip"] = {"path": r.pop("video"), "bytes": None}
        del r["answer"]
    table = pa.Table.from_pylist(rows)
    dd = tmp_path / "saved"
    features = {"gold": {"_type": "ClassLabel", "names": list("ABCDEFGHIJ")}, "clip": {"_type": "Video"}}
    _save_to_disk(table, dd / "test", "test", features)
    _save_to_disk(table.slice(0, 1), dd / "train", "train", features)
    (dd / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    got = _import(dd, "hf-folder", tmp_path / "items", "--map", "answer=gold,answer_kind=letter,video=clip")
    _same(got, original)
    assert {i.item_id for i in got} == set(original)
    one = _import(dd, "hf-folder", tmp_path / "train", "--split", "train", "--map", "answer=gold,video=clip")
    assert len(one) == 1
