"""The QA dataset rules, and exit code 2 for every failed precondition (nothing is run)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from qa_servers import qa_entry, read_json, run_cli, vlm_cmd

from benchcheck.cli import main
from benchcheck.qa.dataset import DatasetError, load_dataset, parse_dataset

QA_PAGE = Path(__file__).resolve().parents[2] / "docs" / "qa.md"


def test_selection_and_skip_reasons(tmp_path: Path) -> None:
    data = [
        qa_entry("1", "Is it? "),
        {"id": 2, "question": "Alt key", "ground_truth": "no", "evaluation_method": ["qa", "trajectory"],
         "video": "sub/b.mp4"},
        qa_entry("3", "report", methods=["report"]),
        qa_entry("4", "trajectory only", methods=["trajectory"]),
        qa_entry("5", "no gt", ground_truth=None),
        qa_entry("6", "list gt", ground_truth=["a", "b"]),
        qa_entry("7", "blank gt", ground_truth="  "),
        {"id": "8", "query": "unmarked", "ground_truth": "x", "video": "a.mp4"},
        qa_entry("9", "empty methods", methods=[]),
    ]
    ds = parse_dataset(data, tmp_path / "d.json", tmp_path)
    assert [i.id for i in ds.items] == ["1", "2"]
    assert ds.items[1].question == "Alt key" and ds.items[1].video_path == (tmp_path / "sub/b.mp4").resolve()
    assert ds.skipped == {"no_evaluation_method": 2, "no_text_ground_truth": 3, "not_qa": 2}
    assert ds.total == 9


@pytest.mark.parametrize(("data", "message"), [
    ({"items": []}, "expected a JSON list"),
    ([qa_entry("a", "q", methods=["report"])], "no runnable qa item (not_qa=1)"),
    ([], "no runnable qa item"),
    ([1, 2], "no runnable qa item (not_an_object=2)"),
    # Every qa entry is broken: nothing can run, so it is the dataset's problem (and each is listed).
    ([qa_entry("a", "q", video="../outside.mp4")], "1 qa entries that cannot run"),
])
def test_bad_datasets(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(DatasetError) as info:
        parse_dataset(data, tmp_path / "d.json", tmp_path)
    assert message in str(info.value)
    assert str(tmp_path / "d.json") in str(info.value)


@pytest.mark.parametrize(("entry", "message"), [
    (qa_entry("b", "q"), "duplicate id 'b' (first at entry 0)"),
    ({"query": "q", "ground_truth": "g", "evaluation_method": ["qa"], "video": "a.mp4"}, "missing or invalid 'id'"),
    (qa_entry("x", "q", video="../outside.mp4"), "leaves the videos folder"),
    (qa_entry("x", "q", video="/etc/passwd"), "leaves the videos folder"),
    ({**qa_entry("x", "q"), "video": None}, "needs 'video'"),
    ({**qa_entry("x", ""), "query": ""}, "needs a text 'query'"),
    ({**qa_entry("x", "q"), "evaluation_method": "qa"}, "must be a list of strings"),
    ({**qa_entry("x", "q"), "evaluation_method": ["qa", 3]}, "must be a list of strings"),
])
def test_a_qa_entry_that_cannot_run_is_an_item_error(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    ds = parse_dataset([qa_entry("b", "good"), entry, qa_entry("c", "good too")], tmp_path / "d.json", tmp_path)
    assert [i.id for i in ds.items] == ["b", "c"]
    assert len(ds.entry_errors) == 1 and ds.entry_errors[0].entry == 1
    assert message in ds.entry_errors[0].why
    assert ds.skipped == {}


@pytest.mark.parametrize(("entry", "reason"), [
    ({"query": "no id", "ground_truth": "x", "evaluation_method": ["report"]}, "not_qa"),
    ({"id": "r", "evaluation_method": "report"}, "invalid_evaluation_method"),
    ({"id": "r", "evaluation_method": [{"m": "qa"}]}, "invalid_evaluation_method"),
    (5, "not_an_object"),
    (qa_entry("r", "q", ground_truth=None, video="../x.mp4"), "no_text_ground_truth"),
])
def test_a_non_qa_entry_is_skipped_whatever_else_is_wrong(tmp_path: Path, entry: Any, reason: str) -> None:
    ds = parse_dataset([qa_entry("b", "good"), entry], tmp_path / "d.json", tmp_path)
    assert [i.id for i in ds.items] == ["b"] and ds.entry_errors == []
    assert ds.skipped == {reason: 1}
    assert [(e.entry, e.why) for e in ds.skipped_entries] == [(1, reason)]


def test_symlink_out_of_the_videos_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "videos"
    root.mkdir()
    (root / "link.mp4").symlink_to(tmp_path / "secret.mp4")
    ds = parse_dataset([qa_entry("a", "q", video="link.mp4"), qa_entry("b", "q")], tmp_path / "d.json", root)
    assert [i.id for i in ds.items] == ["b"]
    assert "outside the videos folder" in ds.entry_errors[0].why


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_dataset(bad, tmp_path)
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(tmp_path / "missing.json", tmp_path)
    with pytest.raises(DatasetError, match="videos folder"):
        load_dataset(bad, tmp_path / "no-such-dir")


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    base = {"EVAL_LLM_JUDGE_BASE_URL": "", "EVAL_LLM_JUDGE_NAME": "", "EVAL_LLM_JUDGE_API_KEY": ""}
    return CliRunner().invoke(main, args, env={**base, **(env or {})})


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json", "not valid JSON"),
    (json.dumps({"a": 1}), "expected a JSON list"),
    (json.dumps([qa_entry("x", "q", video="../../etc/passwd")]), "leaves the videos folder"),
    ("[]", "no runnable qa item"),
    (json.dumps([qa_entry("x", "q", methods=["report"])]), "no runnable qa item"),
    # Nested past the JSON decoder's depth: the dataset's problem (exit 2), not a traceback (exit 1).
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
])
def test_bad_dataset_exits_2(tmp_path: Path, clips: Path, content: str, needle: str) -> None:
    ds = tmp_path / "d.json"
    ds.write_text(content)
    out = tmp_path / "out"
    res = _invoke(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", "echo {video} {question}", "--skip-judge"])
    assert res.exit_code == 2, res.output
    assert needle in res.output and str(ds) in res.output
    assert not out.exists()


@pytest.mark.parametrize(("extra", "env", "needle"), [
    ([], {}, "EVAL_LLM_JUDGE_BASE_URL and EVAL_LLM_JUDGE_NAME"),
    (["--skip-judge", "--vlm-endpoint", "http://127.0.0.1:9/v1"], {}, "exactly one of --vlm-cmd or --vlm-endpoint"),
    (["--skip-judge", "--vlm-model", "m"], {}, "apply to --vlm-endpoint only"),
    ([], {"EVAL_LLM_JUDGE_BASE_URL": "ftp://x", "EVAL_LLM_JUDGE_NAME": "j"}, "not an http(s) URL"),
    ([], {"EVAL_LLM_JUDGE_BASE_URL": "http://u:pw@h/v1", "EVAL_LLM_JUDGE_NAME": "j"}, "credentials in the URL"),
])
def test_other_preconditions_exit_2(tmp_path: Path, clips: Path, write_dataset: Callable[[list[Any]], Path],
                                    extra: list[str], env: dict[str, str], needle: str) -> None:
    ds = write_dataset([qa_entry("a", "q")])
    res = _invoke(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(tmp_path / "o"),
                   "--vlm-cmd", "echo {video} {question}", *extra], env)
    assert res.exit_code == 2, res.output
    assert needle in res.output


def test_template_without_question_exits_2(tmp_path: Path, clips: Path,
                                           write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "q")])
    res = _invoke(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(tmp_path / "o"),
                   "--vlm-cmd", "vlm --video {video}", "--skip-judge"])
    assert res.exit_code == 2 and "{question}" in res.output


def test_endpoint_needs_model_and_key_variable(tmp_path: Path, clips: Path,
                                               write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "q")])
    base = ["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(tmp_path / "o"),
            "--skip-judge", "--vlm-endpoint", "http://127.0.0.1:9"]
    res = _invoke(base)
    assert res.exit_code == 2 and "--vlm-model" in res.output
    res = _invoke([*base, "--vlm-model", "m", "--vlm-api-key-env", "QA_NO_SUCH_VAR"])
    assert res.exit_code == 2 and "QA_NO_SUCH_VAR" in res.output


def test_judge_on_a_folder_without_a_run_exits_2(tmp_path: Path) -> None:
    res = _invoke(["qa", "judge", "--output-dir", str(tmp_path)],
                  {"EVAL_LLM_JUDGE_BASE_URL": "http://127.0.0.1:9", "EVAL_LLM_JUDGE_NAME": "j"})
    assert res.exit_code == 2 and "run_config.json not found" in res.output


def test_one_bad_entry_of_each_kind_does_not_stop_the_run(tmp_path: Path, clips: Path,
                                                         write_dataset: Callable[[list[Any]], Path]) -> None:
    """The review's dataset: a report item without an id, an evaluation_method that is not a list,
    a qa item without a video, beside good items: the good ones run, the bad ones are counted."""
    ds = write_dataset([
        qa_entry("good-1", "Is it? [say:yes]"),
        {"query": "Summarize", "ground_truth": "a report", "evaluation_method": ["report"], "video": "a.mp4"},
        {**qa_entry("str-method", "Is it? [say:yes]"), "evaluation_method": "qa"},
        {"id": "no-video", "query": "Where? [say:x]", "ground_truth": "here", "evaluation_method": ["qa"]},
        qa_entry("good-2", "And this? [say:no]", video="sub/b.mp4"),
    ])
    out = tmp_path / "out"
    res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", vlm_cmd(), "--skip-judge"], {})
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr
    summary = read_json(out / "summary.json")
    c = summary["counts"]
    assert (c["selected"], c["dataset_errors"], c["skipped"], c["errors"]) == (2, 2, 1, 2)
    assert c["skipped_by_reason"] == {"not_qa": 1}
    assert summary["skipped_entries"] == [{"entry": 1, "id": None, "why": "not_qa"}]
    errors = {e["entry"]: e for e in summary["errors"] if e["stage"] == "dataset"}
    assert set(errors) == {2, 3}
    assert errors[2]["id"] == "str-method" and "list of strings" in errors[2]["error"]
    assert errors[3]["id"] == "no-video" and "needs 'video'" in errors[3]["error"]
    assert "entry 3 (id no-video)" in res.stderr
    # docs/qa.md names the fields of both lists as summary.json has them (it said `reason` and `message`)
    for field, rows in (("skipped_entries", summary["skipped_entries"]), ("errors", summary["errors"])):
        listed = re.search(rf"`{field}` \(([^;)]*)", QA_PAGE.read_text(encoding="utf-8"))
        assert listed, field
        names = {part.split()[0].rstrip(":") for part in listed.group(1).split(",")}
        assert names <= set().union(*rows), (field, names)
    answers = {w["id"]: w["generated_answer"] for w in read_json(out / "workflow_output.json")}
    assert answers == {"good-1": "yes", "good-2": "no"}
    assert summary["latency_s"]["n"] == 2

    # Only non-qa entries skipped: that is no error.
    ds2 = write_dataset([qa_entry("good-1", "Is it? [say:yes]"),
                         {"query": "Summarize", "evaluation_method": ["report"]}, 7])
    res = run_cli(["qa", "run", "--dataset", str(ds2), "--videos", str(clips), "--output-dir", str(tmp_path / "o2"),
                   "--vlm-cmd", vlm_cmd(), "--skip-judge"], {})
    assert res.returncode == 0, res.stderr
    assert read_json(tmp_path / "o2" / "summary.json")["counts"]["skipped_by_reason"] == {
        "not_an_object": 1, "not_qa": 1}
