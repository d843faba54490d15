"""The Inspect AI export with real videos: each item's video part names a file Inspect finds, whatever
folder ``inspect eval`` runs in. A path the export writes absolute (``--store``) is found as it is; a
relative one is found because Inspect's ``json_dataset`` looks for it beside the data file first, so an
export into the folder the items' paths are relative to resolves them. Item text (unicode, formula- and
template-looking strings) is written as data and comes back unchanged, through an evaluation too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video
from scripted_pool import cli, screened

ODD = [
    ("=SUM(A1:A3) or $\\frac{1}{2}$?", ["{question}", "x² ≤ ∑ᵢ aᵢ", "=cmd|' /C calc'!A0", "{{ choices }}"]),
    ("Ce café\u2028une ligne\x85deux ? 中文 עברית 🎬", ["%s %d", "\\n not a newline", "null", "$(rm -rf /)"]),
]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path, dict[str, dict[str, Any]]]:
    """(root, items, results, store, the item rows by id); the videos under ``root/raw``."""
    root = tmp_path_factory.mktemp("inspect")
    raw = root / "raw"
    make_test_video(raw / "c.mp4", n_frames=6, fps=2, width=64, height=48)
    shutil.copy(raw / "c.mp4", raw / "d.MOV")
    store = root / "store"
    assert not normalize_videos([raw], store, workers=1, progress=False).failures
    rows = [
        {"item_id": "key", "video": "local::raw::c.mp4", "question": ODD[0][0], "options": ODD[0][1], "answer": 1},
        {"item_id": "rel", "video": "raw/c.mp4", "question": ODD[1][0], "options": ODD[1][1], "answer": 3},
        {"item_id": "mov", "video": str(raw / "d.MOV"), "question": "Which?", "options": ["a", "b"], "answer": 0},
        {"item_id": "none", "question": "No video: which?", "options": ["a", "b", "c"], "answer": 2},
        {"item_id": "gone", "video": "raw/c.mp4", "question": "Removed?", "options": ["RIGHT", "b"], "answer": 0},
    ]
    items, results, _ = screened(root, {"Clips": rows})
    return root, items, results, store, {r["item_id"]: r for r in rows}


def _export(pool: Any) -> Path:
    """Into the folder the items' relative paths are relative to (``root``)."""
    out, items, results, store, _ = pool
    r = cli("export", "--results", str(results), "--items", str(items), "--format", "inspect", "--chain", "1",
            "--store", str(store), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(out / "Clips_kept.inspect.jsonl")]
    return out / "Clips_kept.inspect.jsonl"


def test_video_parts_name_the_files_as_the_export_rule_does(pool: Any) -> None:
    """No Inspect needed: the video part holds the same name the other exports write."""
    root, *_ = pool
    data = _export(pool)
    got = {r["id"]: r for r in map(json.loads, data.read_text(encoding="utf-8").splitlines())}
    assert set(got) == {"key", "rel", "mov", "none"}
    parts = {iid: r["input"][0]["content"][0] for iid, r in got.items() if not isinstance(r["input"], str)}
    assert parts == {"key": {"type": "video", "video": str(root / "raw" / "c.mp4"), "format": "mp4"},
                     "rel": {"type": "video", "video": "raw/c.mp4", "format": "mp4"},
                     "mov": {"type": "video", "video": str(root / "raw" / "d.MOV"), "format": "mov"}}
    assert got["none"]["input"] == "No video: which?"


def test_json_dataset_finds_every_video_and_keeps_the_text(pool: Any) -> None:
    dataset = pytest.importorskip("inspect_ai.dataset", reason="inspect_ai is not installed (pip install inspect_ai)")
    root, _, _, _, rows = pool
    data = _export(pool)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    cwd = os.getcwd()
    os.chdir(elsewhere)  # a relative video is found beside the data file, not in the folder Inspect runs in
    try:
        samples = {str(s.id): s for s in dataset.json_dataset(str(data))}
    finally:
        os.chdir(cwd)
    assert set(samples) == {"key", "rel", "mov", "none"}
    for iid, s in samples.items():
        row = rows[iid]
        assert s.choices == row["options"] and s.target == "ABCD"[row["answer"]]
        if iid == "none":
            assert s.input == row["question"]
            continue
        [message] = s.input
        video, text = message.content
        assert video.type == "video" and Path(video.video).is_absolute() and Path(video.video).is_file()
        assert text.text == row["question"] and message.text == row["question"]


EVAL = """
import sys
from inspect_ai import Task, eval
from inspect_ai.dataset import json_dataset
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice

data, logs = sys.argv[1], sys.argv[2]
dataset = json_dataset(data)
def reply(letter):
    # usage given: the mock model would otherwise count tokens with an encoding it downloads
    out = ModelOutput.from_content("mockllm/model", "ANSWER: " + letter)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out
model = get_model("mockllm/model", custom_outputs=[reply(s.target) for s in dataset])
[log] = eval(Task(dataset=dataset, solver=multiple_choice(), scorer=choice()), model=model, log_dir=logs,
             display="none")
assert log.status == "success", log.error
for s in log.samples:
    kinds = [c.type for c in s.messages[0].content] if not isinstance(s.messages[0].content, str) else ["str"]
    print(s.id, s.scores["choice"].value, ",".join(kinds), s.messages[0].text.replace("\\n", " | "))
"""


def test_an_inspect_evaluation_reads_the_videos_and_scores_the_gold(pool: Any, tmp_path: Path) -> None:
    """Inspect's own multiple-choice solver and choice scorer over the export, with its mock model
    answering each gold letter: every sample runs (a video it cannot read stops its sample) and scores
    correct, and the prompt it builds holds the item's text as written."""
    pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install inspect_ai)")
    rows = pool[4]
    data = _export(pool)
    # Inspect keeps traces and buffers in the user's data folder: this run's stay in tmp_path
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYTHONIOENCODING": "utf-8"}
    r = subprocess.run([sys.executable, "-c", EVAL, str(data), str(tmp_path / "logs")], capture_output=True,
                       text=True, encoding="utf-8", timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    # split on "\n" only: the questions hold other line separators (U+2028, NEL)
    lines = {line.split(" ", 1)[0]: line.split(" ", 3)[1:] for line in r.stdout.split("\n") if line}
    assert set(lines) == {"key", "rel", "mov", "none"}
    for iid, (score, kinds, prompt) in lines.items():
        assert score == "C", (iid, score)  # Inspect's CORRECT
        assert kinds == ("str" if iid == "none" else "video,text")
        row = rows[iid]
        assert row["question"].replace("\n", " | ") in prompt
        assert all(f"{'ABCD'[j]}) {o}" in prompt for j, o in enumerate(row["options"]))
