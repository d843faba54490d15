"""`launch --plan-only` with a bad `--shard` printed the step's counts and exited 0, while the same
command without `--plan-only` refused the shard (exit 2): a typo in an array script's share went
unnoticed in its dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main


@pytest.fixture()
def items(tmp_path: Path) -> Path:
    rows = [{"item_id": f"q{i}", "question": f"What is shown in clip {i}?", "options": ["a cat", "a dog"],
             "answer": 0, "video_id": None} for i in range(3)]
    path = tmp_path / "items" / "B.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path.parent


@pytest.mark.parametrize("shard", ["3/2", "1/2:4/4", "0/0", "x"])
def test_plan_only_refuses_a_bad_shard_in_one_line(items: Path, tmp_path: Path, shard: str) -> None:
    r = CliRunner().invoke(main, ["launch", "--step", "1", "--items", str(items), "--results", str(tmp_path / "res"),
                                  "--shard", shard, "--plan-only"])
    assert r.exit_code == 2, r.output
    assert f"--shard {shard!r}: expected auto, i/n" in r.output
    assert "REMAINING_TOTAL" not in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("shard", ["1/2", "1/2:3/4", "0/1"])
def test_plan_only_still_takes_a_good_shard(items: Path, tmp_path: Path, shard: str) -> None:
    r = CliRunner().invoke(main, ["launch", "--step", "1", "--items", str(items), "--results", str(tmp_path / "res"),
                                  "--shard", shard, "--plan-only"])
    assert r.exit_code == 0, r.output
    assert "REMAINING_TOTAL=3" in r.output
