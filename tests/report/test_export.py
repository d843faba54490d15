"""Each export format read back by the field's own conventions: same items, same gold answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_helpers import cli, screened_pool

from benchcheck.items import Item, load_items
from benchcheck.store import load_state

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Item], set[str], set[str]]:
    root = tmp_path_factory.mktemp("export")
    items, res = screened_pool(root)
    by_id = {i.item_id: i for i in load_items([items]).items}
    s1, s4 = load_state(res / "step1"), load_state(res / "step4")
    removed = {i for i in by_id if s1.is_removed(i) or s4.is_removed(i)}
    kept = {i for i in by_id if i in s1.ok and i in s4.ok and i not in removed}
    assert removed and kept and {"Tricky_0", "Tricky_1", "Tricky_2"} <= kept | removed
    return items, res, by_id, kept, removed


def run_export(pool: Any, fmt: str, out: Path, *extra: str) -> None:
    # the pool ran steps 1 and 4: the export names that chain (steps never run leave every item pending)
    r = cli("export", "--results", str(pool[1]), "--items", str(pool[0]), "--format", fmt, "--out", str(out),
            "--chain", "1,4", *extra)
    assert r.returncode == 0, r.stderr


def test_parquet_reads_back_as_a_datasets_folder(pool: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    _, _, by_id, kept, _ = pool
    run_export(pool, "parquet", tmp_path)
    card = (tmp_path / "README.md").read_text()
    configs = yaml.safe_load(card.split("---")[1])["configs"]
    got: dict[str, dict[str, Any]] = {}
    for c in configs:
        files = [tmp_path / f["path"] for f in c["data_files"] if f["split"] == "test"]
        for f in files:
            table = pq.read_table(f)
            assert table.schema.field("options").type == pa.list_(pa.string())
            for row in table.to_pylist():
                got[row["item_id"]] = row
    assert set(got) == kept
    for iid, row in got.items():
        it = by_id[iid]
        assert row["options"] == list(it.options) and row["answer"] == it.answer and row["question"] == it.question
        assert row["answer_letter"] == LETTERS[it.answer]


def _lmms_config(path: Path) -> dict[str, Any]:
    """lmms-eval's own YAML loader when it is installed; else the same `!function` convention by hand."""
    try:
        from lmms_eval.utils import load_yaml_config
    except ImportError:
        import importlib.util

        import yaml

        spec = importlib.util.spec_from_file_location("utils", path.parent / "utils.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)

        class Loader(yaml.SafeLoader):
            pass

        Loader.add_constructor("!function", lambda ld, node: getattr(mod, ld.construct_scalar(node).split(".")[1]))
        return dict(yaml.load(path.read_text(), Loader=Loader))  # a SafeLoader subclass
    return dict(load_yaml_config(yaml_path=str(path), mode="full"))


def test_lmms_eval_task_folder_loads_with_its_yaml_conventions(pool: Any, tmp_path: Path) -> None:
    _, _, by_id, _, removed = pool
    run_export(pool, "lmms-eval", tmp_path, "--removed")
    group = json.loads(json.dumps(__import__("yaml").safe_load((tmp_path / "_benchcheck_removed.yaml").read_text())))
    got: set[str] = set()
    for task in group["task"]:
        cfg = _lmms_config(tmp_path / f"{task}.yaml")
        assert cfg["task"] == task and cfg["dataset_path"] == "json" and cfg["test_split"] == "test"
        data = Path(cfg["dataset_kwargs"]["data_files"]["test"])
        docs = [json.loads(line) for line in data.read_text().splitlines()]
        for doc in docs:
            it = by_id[doc["item_id"]]
            got.add(it.item_id)
            assert cfg["doc_to_choice"](doc) == list(it.options)
            assert cfg["doc_to_target"](doc) == LETTERS[it.answer]
            text = cfg["doc_to_text"](doc)
            assert it.question in text and text.endswith("Answer with the option letter only.")
            assert cfg["process_results"](doc, [f"({LETTERS[it.answer]})"]) == {"accuracy": 1.0}
            wrong = LETTERS[(it.answer + 1) % len(it.options)]
            assert cfg["process_results"](doc, [f"{wrong}. no"]) == {"accuracy": 0.0}
            assert cfg["doc_to_visual"](doc) == []
    assert got == removed


def test_vlmevalkit_tsv_reads_back_with_its_column_rules(pool: Any, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    _, _, by_id, kept, _ = pool
    run_export(pool, "vlmevalkit", tmp_path)
    got: set[str] = set()
    for tsv in sorted(tmp_path.glob("*.tsv")):
        df = pd.read_csv(tsv, sep="\t")  # as VLMEvalKit's load() reads a TSV
        assert list(df.columns[:2]) == ["index", "question"] and "answer" in df.columns and "video" in df.columns
        assert df["index"].is_unique
        for _, line in df.iterrows():
            # VLMEvalKit's MCQ rule: option columns A, B, ... whose cell is not NaN
            options = [str(line[c]) for c in LETTERS if c in df.columns and not pd.isna(line[c])]
            it = by_id[str(line["item_id"])]
            got.add(it.item_id)
            assert options == list(it.options), it.item_id
            assert line["question"] == it.question
            assert options[LETTERS.index(line["answer"])] == it.options[it.answer]
    left_out = [json.loads(line) for f in tmp_path.glob("*.left_out.jsonl") for line in f.read_text().splitlines()]
    assert [x["item_id"] for x in left_out] == ["Tricky_2"] and "'null'" in left_out[0]["reason"]
    assert got == kept - {"Tricky_2"}


def _inspect_rows(out: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for f in sorted(out.glob("*.inspect.jsonl"))
            for row in map(json.loads, f.read_text(encoding="utf-8").splitlines())}


def test_inspect_rows_are_sample_records(pool: Any, tmp_path: Path) -> None:
    """The JSON itself, without Inspect: the fields its ``Sample`` has, the gold as a letter."""
    _, _, by_id, kept, _ = pool
    run_export(pool, "inspect", tmp_path)
    rows = _inspect_rows(tmp_path)
    assert set(rows) == kept  # every kept item, the null-looking option of Tricky_2 too
    with_video = 0
    for iid, row in rows.items():
        it = by_id[iid]
        assert set(row) == {"id", "input", "choices", "target", "metadata"}
        assert row["choices"] == list(it.options) and row["target"] == LETTERS[it.answer]
        assert row["metadata"] == {"bench": it.bench, "task": it.task, "video_id": it.video_id,
                                   "duration_s": it.duration_s, "fate": "kept", "removed_at": None}
        if isinstance(row["input"], str):
            assert row["input"] == it.question
            continue
        with_video += 1
        [message] = row["input"]
        assert message["role"] == "user"
        video, text = message["content"]
        assert video["type"] == "video" and video["format"] == "mp4" and video["video"]
        assert text == {"type": "text", "text": it.question}
    assert with_video  # the pool has items of both kinds
    assert (tmp_path / "Tricky_kept.inspect.jsonl").is_file()


def test_inspect_reads_back_with_json_dataset(pool: Any, tmp_path: Path) -> None:
    dataset = pytest.importorskip("inspect_ai.dataset", reason="inspect_ai is not installed (pip install inspect_ai)")
    _, _, by_id, _, removed = pool
    run_export(pool, "inspect", tmp_path, "--removed")
    got: set[str] = set()
    for f in sorted(tmp_path.glob("*_removed.inspect.jsonl")):
        for sample in dataset.json_dataset(str(f)):
            it = by_id[str(sample.id)]
            got.add(it.item_id)
            assert sample.choices == list(it.options) and sample.target == LETTERS[it.answer]
            text = sample.input if isinstance(sample.input, str) else sample.input[0].text
            assert text == it.question
            assert sample.metadata and sample.metadata["fate"] == "removed" and sample.metadata["removed_at"] in (1, 4)
    assert got == removed
