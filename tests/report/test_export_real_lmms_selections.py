"""A kept and a ``--removed`` lmms-eval export into one folder: the task YAMLs and groups are named
per selection, so both sets of tasks are listed side by side; each task must then read its own
items. With one ``<bench>.jsonl`` per benchmark the second export overwrote the first one's data (the
kept task read the removed items), and deleted the data of a benchmark it had nothing for (the kept
task's file was gone: lmms-eval 0.7.3's loader stopped on FileNotFoundError)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scripted_pool import cli, screened


def _task_items(out: Path, label: str) -> dict[str, set[str]]:
    """Per task of the group ``_benchcheck_<label>.yaml``, the item ids its YAML's data file holds (as
    lmms-eval reads it: the group's task list, each task's ``dataset_kwargs.data_files.test``)."""
    group = yaml.safe_load((out / f"_benchcheck_{label}.yaml").read_text(encoding="utf-8"))
    got = {}
    for name in group["task"]:
        cfg = yaml.safe_load((out / f"{name}.yaml").read_text(encoding="utf-8").replace("!function ", ""))
        data = Path(cfg["dataset_kwargs"]["data_files"]["test"])
        got[name] = {json.loads(line)["item_id"] for line in data.read_text(encoding="utf-8").splitlines()}
    return got


def test_kept_and_removed_exports_share_a_folder(tmp_path: Path) -> None:
    mixed = [{"item_id": f"Mixed_{i}", "question": f"Which one {i}?",
              "options": ["RIGHT", "w1", "w2", "w3"] if i < 2 else ["a", "b", "c", "d"], "answer": 0}
             for i in range(4)]
    stay = [{"item_id": f"Stay_{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(3)]
    items, res, _ = screened(tmp_path, {"Mixed": mixed, "Stay": stay})
    out = tmp_path / "lmms"
    for extra in ((), ("--removed",)):
        r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--out", str(out),
                "--chain", "1", *extra)
        assert r.returncode == 0, r.stderr
    assert _task_items(out, "kept") == {"benchcheck_mixed_kept": {"Mixed_2", "Mixed_3"},
                                        "benchcheck_stay_kept": {"Stay_0", "Stay_1", "Stay_2"}}
    assert _task_items(out, "removed") == {"benchcheck_mixed_removed": {"Mixed_0", "Mixed_1"}}
