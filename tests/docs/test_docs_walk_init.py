"""What `benchcheck init` prints as the next steps agrees with the getting-started page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from docs_text import DOCS, ROOT


def _benchcheck(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def _engine_flags(engine: str) -> str:
    """The flags cell of the getting-started page's engine table for ``engine``."""
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `{engine}` \| `([^`]+)` \|", page, re.M)
    assert row, engine
    return row.group(1)


def test_init_next_steps_name_the_openai_model_as_the_page_does(tmp_path: Path) -> None:
    """The hint once left out `--model NAME`: a server serving any other name than the step's pinned
    model then refused every item (404, exit 3)."""
    assert _benchcheck(["init", "--example", "mine"], tmp_path).returncode == 0
    done = _benchcheck(["init", "--videos", "mine/videos", "--items", "mine/mybench.jsonl", "--out", "proj",
                        "--no-progress"], tmp_path)
    assert done.returncode == 0, done.stderr
    printed = " ".join(done.stdout.split())
    for engine in ("openai", "hf"):
        assert f'E="{_engine_flags(engine)}' in printed, (engine, printed)


def test_init_next_steps_are_the_pages_commands_line_for_line(tmp_path: Path) -> None:
    """The screening loop once came out as `--frames $P/frames       --store` (a backslash-newline
    inside the template joined its two lines), and the items line said "1 files"."""
    assert _benchcheck(["init", "--example", "mine"], tmp_path).returncode == 0
    done = _benchcheck(["init", "--videos", "mine/videos", "--items", "mine/mybench.jsonl", "--out", "proj",
                        "--no-progress"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2/3 items -> proj/items: 1 file; " in done.stdout
    lines = done.stdout.splitlines()
    loop = next(i for i, line in enumerate(lines) if line.lstrip().startswith("for s in"))
    assert lines[loop].endswith("--frames $P/frames \\") and lines[loop + 1].lstrip().startswith("--store $P/store")
    # every command the page gives, joined across its continuation lines, is printed the same
    printed = re.sub(r"\\\n\s*", "", done.stdout)
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    for cmd in ("benchcheck sweep analyze --results $P/sweep/results --out $P/sweep/analysis",
                "--frames $P/frames --store $P/store --step $s $E; done"):
        assert cmd in page and cmd in printed, cmd
    assert not [line for line in lines if re.search(r"\S {2,}\S", line)], "stray spaces inside a printed line"
