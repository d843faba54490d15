"""A malformed endpoint or judge URL stops `qa run` before any item runs (exit 2, one line).

Before, a port out of range, a non-numeric port or a space in the host passed the start checks and
failed every item one by one (exit 3 after the whole run), and a URL with a query or fragment got
the request path appended after it (``...?x=1/v1/chat/completions``), so a live server was asked
on a wrong path for every item.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import qa_entry, run_cli, scripted_server

BAD_URLS = [
    ("http://127.0.0.1:99999", "Port out of range"),
    ("http://127.0.0.1:abc", "Port could not be cast"),
    ("http://127.0.0.1:0", "bad host or port"),
    ("http://a b/", "bad host or port"),
    ("http://[::1", "Invalid IPv6 URL"),
]


def _run(ds: Path, clips: Path, out: Path, url: str, env: dict[str, str], *extra: str) -> Any:
    return run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(out),
                    "--vlm-endpoint", url, "--vlm-model", "vlm", "--num-frames", "2", "--timeout", "5", *extra],
                   env)


@pytest.mark.parametrize(("url", "needle"), BAD_URLS)
def test_malformed_vlm_endpoint_exits_2_before_any_item(tmp_path: Path, clips: Path, url: str, needle: str,
                                                         write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it red?"), qa_entry("b", "Is it blue?")])
    res = _run(ds, clips, tmp_path / "out", url, {}, "--skip-judge")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--vlm-endpoint" in lines[0] and needle in lines[0], res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("url", "needle"), BAD_URLS[:2])
def test_malformed_judge_url_exits_2(tmp_path: Path, clips: Path, url: str, needle: str,
                                     write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it red?")])
    env = {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge"}
    with scripted_server(tmp_path, "vlm", [{"match": "", "reply": "yes"}]) as vlm:
        res = _run(ds, clips, tmp_path / "out", vlm, env)
    assert res.returncode == 2, res.stderr
    assert "EVAL_LLM_JUDGE_BASE_URL" in res.stderr and needle in res.stderr
    assert not (tmp_path / "out" / "answers.jsonl").exists()


@pytest.mark.parametrize("tail", ["/v1?x=1", "#frag", "/?"])
def test_endpoint_with_query_or_fragment_is_refused(tmp_path: Path, clips: Path, tail: str,
                                                    write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it red?")])
    with scripted_server(tmp_path, "vlm", [{"match": "", "reply": "yes"}]) as vlm:
        res = _run(ds, clips, tmp_path / "out", vlm.rstrip("/") + tail, {}, "--skip-judge")
    assert res.returncode == 2, res.stderr
    assert "query or fragment" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_credentials_of_a_malformed_url_are_not_printed(tmp_path: Path, clips: Path,
                                                        write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it red?")])
    res = _run(ds, clips, tmp_path / "out", "http://user:hunter2secret@127.0.0.1:99999", {}, "--skip-judge")
    assert res.returncode == 2
    assert "hunter2secret" not in res.stderr + res.stdout and "***@" in res.stderr
