"""What a user types wrong gets one `error:` line (or click's usage error) and a non-zero exit, never a
traceback; a command that can do nothing says why. Each test is one case an outsider met."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from benchcheck.cli import main


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def _refused(r: Result, *words: str) -> None:
    """Exit 2, no exception escaped (click's runner catches it: exit 1 and ``r.exception``), and the
    output names each of ``words``."""
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    for w in words:
        assert w in r.output, r.output


def _items(path: Path, n: int = 4, bench: str | None = None) -> Path:
    rows = [{"item_id": f"i{k}", "question": f"What is shown {k}?", "options": ["a", "b", "c", "d"],
             "answer": k % 4, **({"bench": bench} if bench else {})} for k in range(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_model_tiny_refuses_a_negative_seed_before_writing(tmp_path: Path) -> None:
    """numpy raised `expected non-negative integer` as a traceback, after the tokenizer files were written."""
    out = tmp_path / "tiny"
    _refused(_run(["model", "tiny", "--out", str(out), "--seed", "-1"]), "--seed")
    assert not out.exists()


def test_demo_out_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    """`demo items --out FILE` raised FileExistsError from mkdir."""
    f = tmp_path / "f"
    f.write_text("x")
    for cmd in (["demo", "items"], ["demo", "run", "--no-qa", "--no-sweep"]):
        _refused(_run([*cmd, "--out", str(f)]), "is a file")
    assert f.read_text() == "x"
