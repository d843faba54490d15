"""What the docs tests read: the README, the pages under docs/, their sentences and code blocks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# Longer than this, a sentence said in two places is a topic said twice (issue 41's measure).
LONG = 60

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
# A sentence ends at . ! ? : ; before a space and a capital, a backquote, a bracket or a quote.
_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z`(\[\"*])")


def pages() -> list[Path]:
    """Every markdown page of the site's sources (the hooks folder holds code, not pages)."""
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


def code_blocks(md: str) -> list[str]:
    return [m.group(1) for m in _FENCE.finditer(md)]


def sentences(md: str) -> set[str]:
    """Normalized sentences (whitespace collapsed) and code lines longer than ``LONG`` characters."""
    out: set[str] = set()
    for block in code_blocks(md):
        out.update(s for line in block.splitlines() if len(s := " ".join(line.split())) > LONG)
    prose = _FENCE.sub("\n\n", md)
    for para in re.split(r"\n\s*\n", prose):
        text = " ".join(para.split())
        out.update(s for part in _SENTENCE_END.split(text) if len(s := part.strip()) > LONG)
    return out


def section(md: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    start = md.index(f"\n## {heading}\n")
    end = md.find("\n## ", start + 1)
    return md[start: end if end >= 0 else len(md)]
