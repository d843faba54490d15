"""The README's commands and the demo page stay true (issue 41: docs that cannot drift).

The "Your own benchmark" block runs as written, by bash on the example data that
``benchcheck init --example`` writes, in tests/own/test_own_end_to_end.py
(``test_readme_your_own_benchmark_runs_as_written``). Here: every command and option the README
writes exists, fast; and the demo page's funnel is what ``benchcheck demo run`` prints (slow:
the whole demo).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from docs_text import DOCS, README, ROOT, code_blocks, pages, section


def _bash(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # `benchcheck` is this interpreter running this tree's package, whatever is on PATH.
    prelude = f'benchcheck() {{ "{sys.executable}" -m benchcheck "$@"; }}\nset -euo pipefail\n'
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(["bash", "-c", prelude + script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _command_lines(script: str) -> list[list[str]]:
    """Each `benchcheck ...` command of a shell block, split as the shell would (variables kept)."""
    joined = script.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0]  # a comment (a `#` inside a word stays)
        for part in line.replace(";", "\n").replace(" do ", "\n").splitlines():
            try:
                words = shlex.split(part)
            except ValueError:  # a quote opened on another line: not a command line of ours
                continue
            if "benchcheck" in words:
                out.append(words[words.index("benchcheck") + 1:])
    return out


def test_readme_commands_name_existing_commands_and_options() -> None:
    """Fast: every command and option the README writes exists (the slow test below runs them)."""
    from benchcheck.cli import main

    readme = README.read_text()
    lines = [words for block in code_blocks(readme) for words in _command_lines(block)]
    # the engine flags the README puts in E="..." and in its prose
    lines.append(shlex.split("screen --step 1 --items I --results R --engine openai --endpoint URL --model NAME"))
    lines.append(shlex.split("screen --step 1 --items I --results R --engine hf --model DIR --device cuda"))
    assert len(lines) >= 6
    for words in lines:
        cmd: click.Command = main
        while isinstance(cmd, click.Group) and words and words[0] in cmd.commands:
            cmd = cmd.commands[words.pop(0)]
        assert not isinstance(cmd, click.Group), f"incomplete command: {words}"
        known = {o for p in cmd.params for o in p.opts + p.secondary_opts}
        unknown = [w for w in words if w.startswith("--") and w.split("=", 1)[0] not in known]
        assert unknown == [], (cmd.name, unknown)
        required = [p.opts[0] for p in cmd.params if isinstance(p, click.Option) and p.required]
        assert [o for o in required if o not in words] == [], (cmd.name, words)


def test_every_docs_page_names_existing_commands_and_options() -> None:
    """The commands in the pages' code blocks (usage lines with [--optional] parts included) name
    commands and options that exist; what follows a bare `--` goes to another program."""
    from benchcheck.cli import main

    checked, unknown = 0, []
    for page in pages():
        if page.name == "PERFORMANCE.md":  # the history of benchmark scripts' flags
            continue
        for block in code_blocks(page.read_text()):
            for words in _command_lines(block.replace("[", " ").replace("]", " ").replace("|", " ")):
                cmd: click.Command = main
                while isinstance(cmd, click.Group) and words and words[0] in cmd.commands:
                    cmd = cmd.commands[words.pop(0)]
                if isinstance(cmd, click.Group):
                    continue  # `benchcheck ...` or a group's usage line
                words = words[: words.index("--")] if "--" in words else words
                known = {o for p in cmd.params for o in p.opts + p.secondary_opts}
                checked += 1
                unknown += [(page.name, cmd.name, w) for w in words
                            if w.startswith("--") and w.split("=", 1)[0].rstrip(",.;:)") not in known]
    assert checked >= 50, checked
    assert unknown == []


def test_readme_install_block_names_what_the_package_declares() -> None:
    install = code_blocks(section(README.read_text(), "Install"))[0]
    assert "pip install -e '.[dev]'" in install
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "dev" in extras


@pytest.mark.slow
def test_demo_page_shows_what_demo_run_prints(tmp_path: Path) -> None:
    """docs/demo.md's first block is the funnel `benchcheck demo run` prints, stage number included."""
    shown = code_blocks((DOCS / "demo.md").read_text())[0].strip().splitlines()
    r = _bash("benchcheck demo run --out demo_out", tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    printed = [line.rstrip() for line in r.stdout.splitlines()]
    first = shown[0].split(" ", 1)[1]  # "funnel per kind: ..." after the stage number
    stage = next(line for line in printed if line.endswith(first))
    assert stage.split(" ", 1)[0] == shown[0].split(" ", 1)[0], (stage, shown[0])
    at = printed.index(stage)
    assert printed[at: at + len(shown)] == [s.rstrip() for s in shown]
