"""What a user reads from the CLI cites the protocol and the site, never the team's internal papers.

`sweep run --help` once sent a reader to "seed 001" and "SPEC", and the sweep's context stop to
"seed 001, section 6": names a user has no way to look up.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import click

from benchcheck.cli import main
from benchcheck.sweep.engine import check_context

# "seed 0" followed by two more digits: the option `--seed 0` stays legal.
INTERNAL = re.compile(r"\b[Ss]eed 0\d\d\b|\bSPEC\b|\b[Ss]pec section\b|\([Ss]pec[:)]|\b[Ii]ssue \d")


def _helps(cmd: click.Command = main, path: str = "benchcheck") -> Iterator[tuple[str, str]]:
    yield path, cmd.get_help(click.Context(cmd, info_name=path, terminal_width=200, max_content_width=200))
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _helps(sub, f"{path} {name}")


def test_the_internal_pattern_sees_what_it_must() -> None:
    assert INTERNAL.search("below this (seed 001).") and INTERNAL.search("fill (SPEC: do not change)")
    assert INTERNAL.search("Images per request (SPEC).")
    assert not INTERNAL.search("benchcheck model tiny --out models/tiny --seed 0")
    assert not INTERNAL.search("the run spec of the condition, run_spec.json, --spec-file")


def test_no_help_text_names_an_internal_paper() -> None:
    found = [(path, m.group(0)) for path, text in _helps() for m in INTERNAL.finditer(text)]
    assert found == []


def test_the_sweeps_context_stop_cites_the_page_that_explains_it() -> None:
    message = check_context(known=32_768, declared=None, needs_budget=True, min_context=65_536 - 1) or ""
    message += check_context(known=60_000, declared=None, needs_budget=True) or ""
    assert "reported, not run" in message
    assert INTERNAL.search(message) is None, message
    assert "docs/sweep.md" in message
