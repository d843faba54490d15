"""Issue 38, point 6: the help texts, defaults and messages a first-time user meets."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from benchcheck.cli import first_example, main

ROOT = Path(__file__).resolve().parents[2]


def _commands(cmd: click.Command = main, name: str = "benchcheck") -> Iterator[tuple[str, click.Command]]:
    yield name, cmd
    if isinstance(cmd, click.Group):
        for sub, c in sorted(cmd.commands.items()):
            yield from _commands(c, f"{name} {sub}")


def _help(args: list[str]) -> str:
    r = CliRunner().invoke(main, [*args, "--help"], terminal_width=110)
    assert r.exit_code == 0, r.output
    return r.output


def test_overview_examples_are_whole_commands() -> None:
    """The overview lists one line per command: a continued example is joined, never cut at its `\\`."""
    text = _help([])
    lines = text.split("Examples (one per command; see COMMAND --help):", 1)[1].splitlines()
    examples = [x.strip() for x in lines if x.strip()]
    assert examples and all(x.startswith("benchcheck ") and not x.endswith("\\") for x in examples)
    sweep_run = next(x for x in examples if x.startswith("benchcheck sweep run"))
    assert sweep_run.endswith("--pilot") and "  " not in sweep_run
    qa_run = next(x for x in examples if x.startswith("benchcheck qa run"))
    assert qa_run.endswith("--vlm-env NGC_API_KEY") and "  " not in qa_run


def test_first_example_joins_continued_lines() -> None:
    text = "Do it.\n\n\b\nExample:\n  prog a \\\n    --b c\n  prog second\n"
    assert first_example(text) == "prog a --b c"
    assert first_example("no example") is None


@pytest.mark.parametrize("args", [["qa", "run"], ["report"], ["sweep", "run"]])
def test_example_lines_keep_their_line_breaks(args: list[str]) -> None:
    """A `\\` at a docstring line end joined the lines in Python (whitespace collapsed into one line);
    the examples show the continuation as written."""
    text = _help(args)
    block = text.split("Example:", 1)[1]
    lines = [x for x in block.splitlines() if x.strip()]
    cont = [i for i, x in enumerate(lines) if x.rstrip().endswith("\\")]
    assert cont and all(lines[i + 1].lstrip().startswith("--") for i in cont), block
    assert not re.search(r"\S {4,}--", block), block


def test_every_option_has_help() -> None:
    """assemble --keep/--columns and export --results/--items had none; now no command's option lacks one."""
    missing = [f"{name} {p.opts[0]}" for name, cmd in _commands() for p in cmd.params
               if isinstance(p, click.Option) and not p.help and not p.hidden and p.opts[0] != "--help"
               and name.split()[1:2] in (["assemble"], ["export"], ["items"], ["report"])]
    assert missing == []
    assert "Step-0 kept list" in _help(["assemble"]) and "Screening results folder" in _help(["export"])


def test_report_workers_default_matches_the_docs() -> None:
    """The help named this machine's core count (2 here) while docs/report.md says "up to 4, one per core"."""
    text = " ".join(_help(["report"]).split())
    assert "[default: (one per core, at most 4)" in text
    assert "default: up to 4, one per core" in (ROOT / "docs" / "report.md").read_text()
    from benchcheck.cli.report import default_workers

    assert 1 <= default_workers() <= 4


def test_no_help_text_points_at_a_file_a_package_install_lacks() -> None:
    for name, cmd in _commands():
        assert "PROTOCOL.md" not in cmd.get_help(click.Context(cmd, info_name=name)), name


def test_protocol_command_prints_the_shipped_page_and_its_sections() -> None:
    import tomllib

    shipped = (ROOT / "src" / "benchcheck" / "docs" / "PROTOCOL.md").read_text()
    assert shipped == (ROOT / "docs" / "PROTOCOL.md").read_text(), "copy docs/PROTOCOL.md to src/benchcheck/docs/"
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "docs/*.md" in package_data["benchcheck"]  # a wheel ships it
    runner = CliRunner()
    whole = runner.invoke(main, ["protocol"])
    assert whole.exit_code == 0 and whole.output == shipped
    part = runner.invoke(main, ["protocol", "frame"])
    assert part.exit_code == 0 and part.output.startswith("## Frame plans\n") and "## QA benchmark" not in part.output
    assert runner.invoke(main, ["protocol", "VIDEOS"]).output.startswith("## Videos\n")
    bad = runner.invoke(main, ["protocol", "nosuch"])
    assert bad.exit_code == 2 and "'nosuch' is not a section; sections: Items, Prompts" in bad.output
    amb = runner.invoke(main, ["protocol", "s"])  # Steps, Sharding and leases
    assert amb.exit_code == 2 and "matches several sections" in amb.output


def test_validate_prints_the_summary_warning_once(tmp_path: Path) -> None:
    rows = [{"item_id": f"x{i}", "question": "" if i % 3 == 0 else "q?", "options": ["a", "b"], "answer": 0}
            for i in range(20)]
    (tmp_path / "S.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = CliRunner().invoke(main, ["items", "validate", str(tmp_path / "S.jsonl")])
    assert r.exit_code == 1
    assert r.output.count("7 of 20 records are bad") == 1, r.output
    # first on stderr, before the per-item lines that would bury it; the table does not repeat it
    assert r.stderr.splitlines()[0].startswith("warning: S: 7 of 20 records are bad")
    assert r.stdout.splitlines()[0].startswith("benchmark") and "TOTAL" in r.stdout


def test_model_path_under_a_local_folder_is_no_such_folder_without_the_hub(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`--model models/nosuch` beside a `models/` folder asked the hub (22 s offline before failing)."""
    from benchcheck.engines.hf.checkpoint import NotACheckpoint, not_a_hub_id, resolve_checkpoint

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"x")
    t0 = time.perf_counter()
    with pytest.raises(NotACheckpoint, match=r"^--model models/nosuch: no such folder \(there is a folder models/"):
        resolve_checkpoint("models/nosuch", None)
    assert time.perf_counter() - t0 < 1.0
    assert not_a_hub_id("a/b/c") == "no such folder" and not_a_hub_id("./x") == "no such folder"
    assert not_a_hub_id("weights.bin") == "a file, not a checkpoint folder"
    assert not_a_hub_id("Qwen/Qwen3-VL-8B-Instruct") is None and not_a_hub_id("gpt2") is None


def test_sweep_logs_default_inside_the_results_folder(tmp_path: Path) -> None:
    from benchcheck.cli.sweep import log_dirs

    res = tmp_path / "out" / "results"
    assert log_dirs(str(res), None, None) == (res / "logs", res / "data" / "logs")
    # --logs given (as `launch --sweep` does): data/logs beside it, the returns tarball's layout
    assert log_dirs(str(res), "run/logs", None) == (Path("run/logs"), Path("run/data/logs"))
    assert log_dirs(str(res), None, "dl") == (res / "logs", Path("dl"))
    items = tmp_path / "A.jsonl"
    items.write_text(json.dumps({"item_id": "a", "question": "q?", "options": ["x", "y"], "answer": 0}) + "\n")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -0.1, "B": -3}}]))
    r = CliRunner().invoke(main, ["sweep", "run", "--items", str(items), "--results", str(res), "--engine", "scripted",
                                  "--rules", str(rules), "--conds", "v_blind", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert (res / "logs" / "runner.log").is_file() and (res / "data" / "logs" / "p1_timing.jsonl").is_file()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results"]
