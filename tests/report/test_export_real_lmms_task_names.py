"""Two benchmarks whose names differ only in case, ``-`` or ``.`` (``Video-MME``, ``video_mme``) folded
to one lmms-eval task name: the second YAML overwrote the first, so lmms-eval 0.7.3's TaskManager found
one task, the group named it twice, and the first benchmark's items were not evaluated. Each task now
has a name of its own, and each reads its own benchmark's items."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scripted_pool import cli, screened


def test_benchmarks_folding_to_one_task_name_stay_two_tasks(tmp_path: Path) -> None:
    benches = {b: [{"item_id": f"{b}_{i}", "question": f"Plain {b} {i}?", "options": ["a", "b", "c", "d"],
                    "answer": i % 4} for i in range(n)] for b, n in (("Video-MME", 2), ("video_mme", 3))}
    items, res, _ = screened(tmp_path, benches)
    out = tmp_path / "lmms"
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--out", str(out),
            "--chain", "1")
    assert r.returncode == 0, r.stderr
    group = yaml.safe_load((out / "_benchcheck_kept.yaml").read_text(encoding="utf-8"))
    assert len(set(group["task"])) == 2, group
    got = {}
    for name in group["task"]:
        cfg = yaml.safe_load((out / f"{name}.yaml").read_text(encoding="utf-8").replace("!function ", ""))
        assert cfg["task"] == name  # lmms-eval registers the task by this key, not by the file name
        data = Path(cfg["dataset_kwargs"]["data_files"]["test"]).read_text(encoding="utf-8").splitlines()
        got[cfg["metadata"]["bench"]] = {json.loads(line)["item_id"] for line in data}
    assert got == {b: {r["item_id"] for r in rows} for b, rows in benches.items()}
