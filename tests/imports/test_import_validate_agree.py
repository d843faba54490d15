"""`items import` and `items validate` say the same of the same records: the >5 % warning, the
repeated-id note and each refused record, with the same references (the line a CSV row or a JSON
line starts on), through one settle of ids (`items.load.settle`) and one printer
(`cli.common.say_problems`). The repeated-id note names the first repeat and the item it repeats,
and suggests `video+ID` only where the ids are numbered per video, not where one id slipped twice.
Real files, real CLI runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

# NExT-QA's own columns: qid restarts at 0 in every video
NEXTQA = """video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4
4010069381,369,640,480,how do the two man play the instrument,0,0,CH,roll the handle,tap feet,strum,hit,pat
4010069381,369,640,480,why does the man stop,1,1,CW,tired,song ends,phone rang,fell,laughing
5331177633,1200,640,480,what is the dog doing,2,0,TC,sleeping,eating,running,barking,sitting
"""


def bc(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "benchcheck", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def lab_bench(path: Path, blank_line: bool = False) -> Path:
    """Ten items, each on its own video; item 8 (line 8) reuses item 4's id for another question."""
    rows = [{"item_id": "q3" if i == 7 else f"q{i}", "video": f"v{i}.mp4", "question": f"What is shown {i}?",
             "options": ["a", "b", "c"], "answer": i % 3} for i in range(10)]
    lines = [json.dumps(r) for r in rows]
    if blank_line:
        lines.insert(1, "")  # validate numbers lines as they are in the file
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_id_typed_twice_is_named_by_line_and_no_map_is_suggested(tmp_path: Path) -> None:
    lab_bench(tmp_path / "LabBench.jsonl")
    r = bc("items", "validate", "LabBench.jsonl", cwd=tmp_path)
    assert r.returncode == 1
    note = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert note == ["note: LabBench.jsonl:8: item_id column 'item_id' repeats: 'q3' here is the id of "
                    "LabBench.jsonl:4 too (1 duplicate in this file): the later items are refused; give each item "
                    "its own id"]
    assert "--columns" not in r.stderr and ":0:" not in r.stderr
    assert "bad item: LabBench.jsonl:8: q3: duplicate item_id (first in LabBench.jsonl:4)" in r.stderr.splitlines()


def test_an_id_repeated_on_one_video_suggests_no_map(tmp_path: Path) -> None:
    """video+ID would not part two items of one video that share an id: no map is named."""
    rows = [{"item_id": str(i % 2), "video": "same.mp4", "question": f"Q{i}?", "options": ["a", "b"], "answer": 0}
            for i in range(4)]
    (tmp_path / "One.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "validate", "One.jsonl", cwd=tmp_path)
    assert "note: One.jsonl:3: item_id column 'item_id' repeats: '0' here is the id of One.jsonl:1 too (2 duplicates " \
           "in this file): the later items are refused" in r.stderr
    assert "--columns" not in r.stderr


def test_import_says_what_validate_says_of_a_nextqa_csv_mapped_by_qid(tmp_path: Path) -> None:
    (tmp_path / "nextqa.csv").write_text(NEXTQA)
    v = bc("items", "validate", "nextqa.csv", "--columns", "item_id=qid", cwd=tmp_path)
    i = bc("items", "import", "nextqa.csv", "--from", "hf-folder", "--map", "item_id=qid", "--out", "imp", cwd=tmp_path)
    assert v.returncode == 1 and i.returncode == 0  # import wrote the two others
    said = v.stderr.splitlines()
    assert said == [
        "warning: nextqa: 1 of 3 records are bad (33.3%) in nextqa.csv; most often: duplicate item_id (1), e.g. "
        "duplicate item_id (first in nextqa.csv:2)",
        "note: nextqa.csv:4: item_id column 'qid' repeats: '0' here is the id of nextqa.csv:2 too (1 duplicate in "
        "this file) but video+qid is unique and 2 of 3 items share their id with an item of another video: the file "
        "numbers its questions per video; pass --columns 'item_id=video+qid'",
        "bad item: nextqa.csv:4: 0: duplicate item_id (first in nextqa.csv:2)"]
    assert i.stderr.splitlines() == [*said, "2 items of 1 benchmark imported, 1 refused"]
    assert i.stdout.splitlines() == [str(Path("imp") / "nextqa.jsonl")]


def test_import_names_records_as_validate_does_in_jsonl_and_json(tmp_path: Path) -> None:
    """A JSONL record by its line (a blank line counted), a JSON list's record by #N."""
    lab_bench(tmp_path / "LabBench.jsonl", blank_line=True)
    rows = [json.loads(line) for line in (tmp_path / "LabBench.jsonl").read_text().splitlines() if line]
    rows[2]["options"] = "a, b"  # one record that cannot be an item
    (tmp_path / "Listed.json").write_text(json.dumps(rows))
    for name in ("LabBench.jsonl", "Listed.json"):
        v = bc("items", "validate", name, cwd=tmp_path)
        i = bc("items", "import", name, "--from", "hf-folder", "--out", f"imp_{name}", cwd=tmp_path)
        assert v.stderr.splitlines() == i.stderr.splitlines()[:-1], (name, v.stderr, i.stderr)
        assert i.returncode == 0
    jl = bc("items", "validate", "LabBench.jsonl", cwd=tmp_path).stderr
    assert "bad item: LabBench.jsonl:9: q3: duplicate item_id (first in LabBench.jsonl:5)" in jl.splitlines()
    js = bc("items", "import", "Listed.json", "--from", "hf-folder", "--out", "again", cwd=tmp_path).stderr
    assert "bad item: Listed.json:#8: q3: duplicate item_id (first in Listed.json:#4)" in js.splitlines()
    assert "bad item: Listed.json:#3: q2: options is text ('a, b'), not a list" in js
