"""``benchcheck protocol [SECTION]``: the protocol page, shipped with the package.

Help texts cite the protocol by section ("benchcheck protocol Videos"); a package install has no
``docs/`` folder, so the page travels as package data (``benchcheck/docs/PROTOCOL.md``, a copy of
``docs/PROTOCOL.md`` that a test keeps equal).
"""

from __future__ import annotations

import re
from importlib import resources

import click

from benchcheck.cli.common import die

_HEADING = re.compile(r"^## (.+)$", re.M)


def protocol_text() -> str:
    return resources.files("benchcheck").joinpath("docs/PROTOCOL.md").read_text(encoding="utf-8")


def sections(text: str) -> dict[str, str]:
    """Heading -> its section (heading line included), in page order."""
    marks = list(_HEADING.finditer(text))
    return {m.group(1).strip(): text[m.start(): marks[i + 1].start() if i + 1 < len(marks) else len(text)].rstrip()
            + "\n" for i, m in enumerate(marks)}


@click.command("protocol")
@click.argument("section", required=False)
def protocol(section: str | None) -> None:
    """Print the screening protocol page (shipped with the package), or one section of it.

    SECTION is matched case-insensitively against the headings (a prefix is enough: "frame" is
    "Frame plans"); an unknown one lists the headings and exits 2.

    \b
    Example:
      benchcheck protocol Videos
    """
    text = protocol_text()
    if section is None:
        click.echo(text, nl=False)
        return
    parts = sections(text)
    want = section.strip().casefold()
    hits = [h for h in parts if h.casefold() == want] or [h for h in parts if h.casefold().startswith(want)]
    if len(hits) != 1:
        why = "matches several sections" if hits else "is not a section"
        die(f"{section!r} {why}; sections: {', '.join(hits or parts)}")
    click.echo(parts[hits[0]], nl=False)


COMMANDS = [protocol]
