"""A VLM command printing JSON nested past the decoder's depth is ``bad_output``, not ``internal``.

Before, ``parse_vlm_output`` let ``RecursionError`` escape: the item was recorded with error kind
``internal`` (the kind of a harness bug) and a Python exception as its message, instead of
``bad_output`` quoting what the command printed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import qa_entry, read_json, run_cli

DEPTH = 3000  # past CPython's default recursion limit (1000)


def test_deeply_nested_vlm_output_is_bad_output(tmp_path: Path, clips: Path,
                                                write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("deep", "Is it red?")])
    script = tmp_path / "vlm.sh"
    script.write_text("#!/bin/sh\nprintf '%s\\n' " + shlex.quote('{"answer": ' + "[" * DEPTH + "}") + "\n")
    script.chmod(0o755)
    res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir",
                   str(tmp_path / "out"), "--vlm-cmd", f"{script} {{question}} {{video}}", "--skip-judge"], {})
    assert res.returncode == 3, res.stderr
    summary = read_json(tmp_path / "out" / "summary.json")
    (error,) = summary["errors"]
    assert error["id"] == "deep" and error["kind"] == "bad_output", error
    assert "RecursionError" not in error["error"]
