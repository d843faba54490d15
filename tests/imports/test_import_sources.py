"""Importing files as the other tools keep them (not written by this project): a VLMEvalKit MCQ TSV with its
own columns, an lmms-eval video task in lmms-eval's style, a ``save_to_disk`` Dataset folder; bad records
one line each, a source that cannot be read one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from import_helpers import invoke

from benchcheck.items import load_items

TSV = ("index\tquestion\thint\tA\tB\tC\tD\tanswer\tcategory\tvideo\tvideo_path\n"
       "0\tHow many cups?\t\t3\t5\t7\t9\tB\tcount\tv0\tvideos/v0.mp4\n"
       "1\tWhat happens?\tlook\train\tsun\t\t\tA\tevent\tv1\tvideos/v1.mp4\n"
       "2\tGap?\t\tx\t\tz\t\tA\tevent\tv2\tvideos/v2.mp4\n"
       "3\tBad gold?\t\tx\ty\t\t\tD\tevent\tv3\tvideos/v3.mp4\n"
       "4\t\"Quoted\ttab\"\t\tNone\tnull\t\t\tB\tevent\tv4\tvideos/v4.mp4\n")


def test_vlmevalkit_tsv_as_vlmevalkit_keeps_it(tmp_path: Path) -> None:
    src = tmp_path / "MyBench.tsv"
    src.write_text(TSV)
    r = invoke("items", "import", str(src), "--from", "vlmevalkit", "--out", str(tmp_path / "items"),
               "--map", "video=video_path")
    assert r.exit_code == 0, r.output
    assert "MyBench.tsv:4: MyBench_2: option B is empty but option C is not" in r.output
    assert "MyBench.tsv:5: MyBench_3: gold letter 'D' matches no option (2 options)" in r.output
    assert "3 items of 1 benchmark imported, 2 refused" in r.output
    items = {i.item_id: i for i in load_items([tmp_path / "items"]).items}
    assert set(items) == {"MyBench_0", "MyBench_1", "MyBench_4"}  # ids from `index`, prefixed: unique per bench
    count = items["MyBench_0"]
    assert count.options == ("3", "5", "7", "9") and count.answer == 1 and count.task == "count"
    assert count.meta["video_key"] == "videos/v0.mp4"
    assert items["MyBench_1"].options == ("rain", "sun")
    assert items["MyBench_4"].question == "Quoted\ttab" and items["MyBench_4"].options == ("None", "null")


def test_vlmevalkit_file_that_is_not_an_mcq_tsv_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "x.tsv"
    src.write_text("index\tprompt\tanswer\n0\thi\tA\n")
    r = invoke("items", "import", str(src), "--from", "vlmevalkit", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert r.output.strip() == (f"error: {src}: not a VLMEvalKit MCQ TSV (it needs a 'question' column and option "
                                "columns A, B, ...; columns: index, prompt, answer)")
    r = invoke("items", "import", str(src), "--from", "vlmevalkit", "--out", str(tmp_path / "o"),
               "--map", "question=nosuch")
    assert r.exit_code == 2


UTILS = '''
import os

def process_docs(dataset):
    return [d for d in dataset if d.get("keep", True)]

def vid_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return [os.path.join("/data/videos", doc["video_name"])]

def vid_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kw = lmms_eval_specific_kwargs or {}
    opts = "\\n".join(f"{chr(65 + i)}. {c}" for i, c in enumerate(doc["candidates"]))
    return f"{kw.get('pre_prompt', '')}{doc['q']}\\n{opts}{kw.get('post_prompt', '')}"
'''

TEMPLATE = '''dataset_path: json
dataset_kwargs:
  data_files:
    test: data/vid.jsonl
output_type: generate_until
doc_to_visual: !function utils.vid_doc_to_visual
doc_to_text: !function utils.vid_doc_to_text
generation_kwargs:
  max_new_tokens: 16
lmms_eval_specific_kwargs:
  default:
    pre_prompt: ""
    post_prompt: "\\nAnswer with the option's letter from the given choices directly."
'''

TASK = '''include: _default_template_yaml
task: vid_mcq
test_split: test
process_docs: !function utils.process_docs
doc_to_target: "{{ 'ABCD'[label] }}"
metric_list:
  - metric: accuracy
'''


def _task(tmp_path: Path) -> Path:
    tmp_path.mkdir()
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "_default_template_yaml").write_text(TEMPLATE)
    (tmp_path / "vid.yaml").write_text(TASK)
    docs = [{"qid": f"q{i}", "q": f"What happens {i}?", "candidates": ["a", "b", "c"], "label": i % 3,
             "video_name": f"v{i}.mp4"} for i in range(5)]
    docs[3]["keep"] = False  # process_docs drops it
    docs[4]["candidates"] = ["a"]  # one option: refused
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "vid.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return tmp_path / "vid.yaml"


def test_lmms_eval_task_in_its_own_style(tmp_path: Path) -> None:
    """include, !function, a Jinja doc_to_target, process_docs, lmms_eval_specific_kwargs, a relative data file."""
    task = _task(tmp_path / "task")
    r = invoke("items", "import", str(task), "--from", "lmms-eval", "--out", str(tmp_path / "items"),
               "--map", "item_id=qid,options=candidates,video=doc_to_visual")
    assert r.exit_code == 0, r.output
    assert "vid.yaml:doc 3: q4: fewer than 2 options (1)" in r.output
    items = {i.item_id: i for i in load_items([tmp_path / "items"]).items}
    assert set(items) == {"q0", "q1", "q2"} and {i.bench for i in items.values()} == {"vid_mcq"}
    q2 = items["q2"]
    # no `question` field: the question is doc_to_text's prompt, as the task asks it
    assert q2.question.startswith("What happens 2?\nA. a\nB. b\nC. c\n") and "letter" in q2.question
    assert q2.options == ("a", "b", "c") and q2.answer == 2 and q2.meta["video_key"] == "/data/videos/v2.mp4"
    # the question column can be named too
    r = invoke("items", "import", str(task), "--from", "lmms-eval", "--out", str(tmp_path / "items2"),
               "--map", "item_id=qid,options=candidates,question=q")
    assert r.exit_code == 0 and load_items([tmp_path / "items2"]).items[0].question == "What happens 0?"


def test_lmms_eval_hub_dataset_and_a_raising_function_are_one_line_each(tmp_path: Path) -> None:
    task = _task(tmp_path / "task")
    (tmp_path / "task" / "hub.yaml").write_text("task: hub\ndataset_path: lmms-lab/Video-MME\ntest_split: test\n")
    r = invoke("items", "import", str(tmp_path / "task" / "hub.yaml"), "--from", "lmms-eval", "--out",
               str(tmp_path / "o"))
    assert r.exit_code == 2 and "dataset_path 'lmms-lab/Video-MME' is a Hub dataset" in r.output
    docs = (tmp_path / "task" / "data" / "vid.jsonl").read_text().splitlines()
    bad = json.loads(docs[0])
    del bad["q"]
    docs[0] = json.dumps(bad)
    (tmp_path / "task" / "data" / "vid.jsonl").write_text("\n".join(docs) + "\n")
    r = invoke("items", "import", str(task), "--from", "lmms-eval", "--out", str(tmp_path / "o"),
               "--map", "item_id=qid,options=candidates")
    assert r.exit_code == 0, r.output
    assert "vid.yaml:doc 0: doc_to_text raised KeyError: 'q'" in r.output
    assert {i.item_id for i in load_items([tmp_path / "o"]).items} == {"q1", "q2"}


def test_hf_dataset_folder_with_spread_options_and_split_errors(tmp_path: Path) -> None:
    import pyarrow as pa

    rows = [{"id": f"n{i}", "query": f"Q{i}?", "a0": "x", "a1": "y", "a2": "z", "label": i % 3, "video": f"{i}.mp4"}
            for i in range(4)]
    folder = tmp_path / "ds"
    folder.mkdir()
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, \
            pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    r = invoke("items", "import", str(folder), "--from", "hf-folder", "--out", str(tmp_path / "items"),
               "--bench", "Spread")
    assert r.exit_code == 0, r.output
    items = load_items([tmp_path / "items" / "Spread.jsonl"]).items
    assert [(i.item_id, i.question, i.options, i.answer) for i in items][:2] == [
        ("n0", "Q0?", ("x", "y", "z"), 0), ("n1", "Q1?", ("x", "y", "z"), 1)]
    assert items[3].meta["video_key"] == "3.mp4"
    # a second import into the same folder is refused, then allowed with --force
    r = invoke("items", "import", str(folder), "--from", "hf-folder", "--out", str(tmp_path / "items"),
               "--bench", "Spread")
    assert r.exit_code == 2 and "Spread.jsonl exists: pass --force" in r.output
    assert invoke("items", "import", str(folder), "--from", "hf-folder", "--out", str(tmp_path / "items"),
                  "--bench", "Spread", "--force").exit_code == 0
    dd = tmp_path / "dd"
    dd.mkdir()
    (dd / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "validation"]}))
    r = invoke("items", "import", str(dd), "--from", "hf-folder", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "several splits (train, validation): choose one with --split" in r.output
    r = invoke("items", "import", str(dd), "--from", "hf-folder", "--out", str(tmp_path / "o"), "--split", "test")
    assert r.exit_code == 2 and "no split 'test' (splits: train, validation)" in r.output


def test_nothing_importable_exits_2_with_the_reason(tmp_path: Path) -> None:
    src = tmp_path / "B.tsv"
    src.write_text("index\tquestion\tA\tB\tanswer\n0\t\tx\ty\tA\n")
    r = invoke("items", "import", str(src), "--from", "vlmevalkit", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "B.tsv:2: B_0: empty question" in r.output
    assert "error: no item could be imported from" in r.output and not (tmp_path / "o").exists()


def test_a_long_cell_is_read_and_the_csv_limit_is_put_back(tmp_path: Path) -> None:
    import csv

    before = csv.field_size_limit()
    hint = "h" * 200_000
    src = tmp_path / "Long.tsv"
    src.write_text(f"index\tquestion\tA\tB\tanswer\n0\tQ {hint}?\tx\ty\tB\n")
    r = invoke("items", "import", str(src), "--from", "vlmevalkit", "--out", str(tmp_path / "o"))
    assert r.exit_code == 0, r.output
    assert len(load_items([tmp_path / "o"]).items[0].question) > 200_000
    assert csv.field_size_limit() == before


def test_a_json_object_is_refused_in_one_line(tmp_path: Path) -> None:
    """TempCompass-style: a dict keyed by video, not a list of records."""
    src = tmp_path / "multi-choice.json"
    src.write_text(json.dumps({"v1": [{"question": "q?", "options": ["a", "b"]}], "v2": []}, indent=1))
    r = invoke("items", "import", str(src), "--from", "hf-folder", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert r.output.strip() == (f"error: {src}: a JSON object (keys: v1, v2), not a list of records: give a JSON "
                                "list or JSON lines, one record each")
    lines = tmp_path / "lines.json"  # JSON lines under a .json name
    lines.write_text(json.dumps({"question": "q?", "options": ["a", "b"], "answer": 1}) + "\n" + "[1]\n")
    r = invoke("items", "import", str(lines), "--from", "hf-folder", "--out", str(tmp_path / "o"))
    assert r.exit_code == 0 and "lines.json:2: line is not a JSON object" in r.output  # as validate names it


def test_lmms_eval_task_named_by_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task YAML given relative to the working directory (as a lab types it) finds its relative data
    file once: lmms-eval resolves data_files against the YAML's folder itself, which must not be joined
    to that folder again."""
    _task(tmp_path / "tasks")
    monkeypatch.chdir(tmp_path)
    r = invoke("items", "import", "tasks/vid.yaml", "--from", "lmms-eval", "--out", "items",
               "--map", "item_id=qid,options=candidates")
    assert r.exit_code == 0, r.output
    assert {i.item_id for i in load_items([tmp_path / "items"]).items} == {"q0", "q1", "q2"}


@pytest.mark.parametrize("text", ['["a", "b"]\n', "- task: x\n- task: y\n", "just a string\n"])
def test_a_task_file_that_is_not_a_mapping_is_one_line(tmp_path: Path, text: str) -> None:
    """A file given as an lmms-eval task whose top level is no mapping: lmms-eval's own loader (the
    project installs it) failed inside with "'list' object has no attribute 'get'"."""
    src = tmp_path / "task.yaml"
    src.write_text(text)
    r = invoke("items", "import", str(src), "--from", "lmms-eval", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert r.output.strip() == f"error: {src}: not a task YAML (top level is not a mapping)"
