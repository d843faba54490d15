"""A VLM endpoint that redirects: the error says so (the judge's case:
``test_qa_judge_host.test_judge_redirect_is_not_followed``).

Before, the refused redirect was reported as ``bad_request 307: http://host/v1: `` with nothing
after the colon, so a user behind an http-to-https redirect (or a moved gateway) could not tell
what was wrong or which URL to use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import RecordingHost, completion, qa_entry, read_json, run_cli

from loopback import thread_server


def _judge(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, completion("judge", '{"score": 1, "reasoning": "same"}')


def test_vlm_endpoint_redirect_is_named_in_the_error(tmp_path: Path, clips: Path,
                                                     write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it?")])
    other = RecordingHost("other", _judge)
    with thread_server(other.app()) as other_url:
        vlm = RecordingHost("vlm", _judge, redirect_to=other_url)
        with thread_server(vlm.app()) as url:
            res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir",
                           str(tmp_path / "out"), "--skip-judge", "--vlm-endpoint", url, "--vlm-model", "vlm",
                           "--num-frames", "2"], {})
    assert res.returncode == 3, res.stderr
    assert vlm.requests and not other.requests
    (error,) = read_json(tmp_path / "out" / "summary.json")["errors"]
    assert "redirect" in error["error"] and "not followed" in error["error"], error
