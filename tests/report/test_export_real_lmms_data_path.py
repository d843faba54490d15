"""lmms-eval hands a task's ``dataset_kwargs.data_files`` to ``datasets.load_dataset``, which reads each
name as a glob pattern: an export into a folder named like ``export[v2]`` (or with ``*``, ``?``) named a
file the pattern did not match, and the task stopped (datasets 5.2: StopIteration; lmms-eval 0.7.3 gave
up after its retries). The YAML now names the file by its glob-escaped path, which matches exactly it;
``items import`` reads data_files as the same patterns."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import yaml

from scripted_pool import cli, screened


def test_export_folder_with_glob_characters_names_its_data_file(tmp_path: Path) -> None:
    rows = [{"item_id": f"b_{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(3)]
    items, res, _ = screened(tmp_path, {"Bench": rows})
    out = tmp_path / "export[v2]*?"
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--out", str(out),
            "--chain", "1")
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load((out / "benchcheck_bench_kept.yaml").read_text(encoding="utf-8").replace("!function ", ""))
    pattern = cfg["dataset_kwargs"]["data_files"]["test"]
    files = list(out.iterdir())
    # the pattern matches the task's data file and nothing else, as datasets' glob reads it
    assert [p.name for p in files if fnmatch.fnmatchcase(str(p), pattern)] == ["Bench_kept.jsonl"]
    # and our own lmms-eval importer reads it back through the same pattern
    imp = cli("items", "import", str(out / "_benchcheck_kept.yaml"), "--from", "lmms-eval",
              "--out", str(tmp_path / "back"))
    assert imp.returncode == 0, imp.stderr
    def ids(paths: list[Path]) -> set[str]:
        return {json.loads(x)["item_id"] for p in paths for x in p.read_text(encoding="utf-8").splitlines()}

    assert ids(sorted((tmp_path / "back").glob("*.jsonl"))) == ids([out / "Bench_kept.jsonl"]) != set()
