"""docs/PERFORMANCE.md holds today's numbers only, the history lives in decision records, and code
comments cite decision ids instead of the old page's rounds."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERFORMANCE = ROOT / "docs" / "PERFORMANCE.md"
DECISIONS = ROOT / "docs" / "decisions"
MAX_BYTES = 20 * 1024

# Code whose comments may cite decisions, never rounds of the old performance notebook.
PENDING: tuple[str, ...] = ()
SCANNED = ("src", "benchmarks")

RECORD_NAME = re.compile(r"^(\d{3})-[a-z0-9][a-z0-9-]*\.md$")
# A section heading of a record, by what it must say (words, so "What was tried" and "Tried" both do).
SECTIONS = {
    "question": re.compile(r"question", re.I),
    "what was tried": re.compile(r"tried", re.I),
    "the numbers": re.compile(r"numbers", re.I),
    "what was chosen": re.compile(r"chose", re.I),
    "the commit": re.compile(r"commit", re.I),
}
COMMIT_ID = re.compile(r"\b[0-9a-f]{7,40}\b")
CITATION = re.compile(r"\bdecisions?\s+((?:\d{3}(?:\s*(?:,|and|-)\s*)?)+)", re.I)
# "round 12", "rounds 9-11", "Round 4a", "PERFORMANCE.md, end to end"; not "--rounds 1000".
ROUND_REF = re.compile(
    r"(?<![-\w])[Rr]ounds?\s+\d|PERFORMANCE\.md[,;:]?\s+(?:[Rr]ounds?\b|sections?\b|end to end|§)"
)


def records() -> list[Path]:
    return sorted(p for p in DECISIONS.glob("*.md") if p.name != "index.md")


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a module's source."""
    out: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append((value.lineno, value.value))
    return out


@functools.cache
def file_comments(path: Path) -> tuple[tuple[int, str], ...]:
    return tuple(comments_and_docstrings(path.read_text(encoding="utf-8")))


def round_refs(source: str) -> list[tuple[int, str]]:
    """Comments and docstrings of ``source`` that name a round or section of the old page."""
    return [(line, m.group(0)) for line, text in comments_and_docstrings(source) for m in ROUND_REF.finditer(text)]


def python_files(tops: tuple[str, ...], skip: tuple[str, ...]) -> list[Path]:
    files = []
    for top in tops:
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if not any(rel == s or rel.startswith(s + "/") for s in skip):
                files.append(p)
    return files


def cited_ids(text: str) -> set[int]:
    ids: set[int] = set()
    for m in CITATION.finditer(text):
        nums = [int(n) for n in re.findall(r"\d{3}", m.group(1))]
        if re.search(r"\d{3}\s*-\s*\d{3}", m.group(1)) and len(nums) == 2:
            ids.update(range(nums[0], nums[1] + 1))
        else:
            ids.update(nums)
    return ids


def test_performance_page_is_at_most_20_kb() -> None:
    size = PERFORMANCE.stat().st_size
    assert size <= MAX_BYTES, f"docs/PERFORMANCE.md is {size} bytes (at most {MAX_BYTES}): move history to a decision"


def test_performance_page_holds_no_rounds() -> None:
    text = PERFORMANCE.read_text(encoding="utf-8")
    assert not re.search(r"^#+\s*Round\b", text, re.M | re.I), "a round's heading: history belongs in docs/decisions"
    assert not re.search(r"(?<![-\w])[Rr]ounds?\s+\d", text), "the page names a round: cite the decision instead"


def test_every_decision_record_has_the_required_sections() -> None:
    found = records()
    assert len(found) >= 40, f"only {len(found)} records under docs/decisions"
    problems = []
    for p in found:
        m = RECORD_NAME.match(p.name)
        if not m:
            problems.append(f"{p.name}: name is not NNN-title.md")
            continue
        text = p.read_text(encoding="utf-8")
        first = text.lstrip().splitlines()[0] if text.strip() else ""
        if not first.startswith(f"# {m.group(1)}"):
            problems.append(f"{p.name}: the title does not start with '# {m.group(1)}'")
        headings = re.findall(r"^##\s+(.+)$", text, re.M)
        for what, rx in SECTIONS.items():
            if not any(rx.search(h) for h in headings):
                problems.append(f"{p.name}: no section for {what}")
        commit_part = re.split(r"^##\s+.*commit.*$", text, flags=re.M | re.I)
        if len(commit_part) < 2 or not COMMIT_ID.search(commit_part[-1]):
            problems.append(f"{p.name}: the commit section names no commit id")
    assert not problems, "\n".join(problems)


def test_decision_ids_are_unique_and_listed_in_the_index() -> None:
    ids: dict[str, list[str]] = {}
    for p in records():
        ids.setdefault(p.name[:3], []).append(p.name)
    assert not {k: v for k, v in ids.items() if len(v) > 1}, "two records share an id"
    index = (DECISIONS / "index.md").read_text(encoding="utf-8")
    missing = [p.name for p in records() if f"({p.name})" not in index]
    assert not missing, f"docs/decisions/index.md does not link {missing}"


def test_every_cited_decision_exists() -> None:
    have = {int(p.name[:3]) for p in records() if RECORD_NAME.match(p.name)}
    texts = {PERFORMANCE: PERFORMANCE.read_text(encoding="utf-8")}
    texts.update({p: p.read_text(encoding="utf-8") for p in records()})
    for p in python_files(SCANNED + PENDING, ()):
        texts[p] = "\n".join(t for _, t in file_comments(p))
    dangling = {
        f"{p.relative_to(ROOT)}: decision {i:03d}"
        for p, text in texts.items()
        for i in cited_ids(text)
        if i not in have
    }
    assert not dangling, "\n".join(sorted(dangling))


def test_the_round_check_sees_what_it_must() -> None:
    src = (
        '"""Measured (docs/PERFORMANCE.md, rounds 9-11)."""\n'
        "X = 1  # alternating rows (gpu_screen, docs/PERFORMANCE.md round 9)\n"
        "def f():\n"
        '    """Two calls in flight (docs/PERFORMANCE.md, end to end)."""\n'
        "# H200 (Round 4a): the kernel\n"
        "Y = 2  # python benchmarks/audit_speed.py --rounds 1000; the 1,000 null rounds; see decision 012\n"
    )
    assert sorted(line for line, _ in round_refs(src)) == [1, 2, 4, 5]
    assert cited_ids("see decisions 021 and 025; decision 003, 004; decisions 050-052") == {3, 4, 21, 25, 50, 51, 52}


def test_no_code_comment_names_a_performance_round() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}: {ref!r}"
        for p in python_files(SCANNED, PENDING)
        for line, text in file_comments(p)
        for ref in ROUND_REF.findall(text)
    ]
    assert not found, "cite a decision id (docs/decisions) instead:\n" + "\n".join(found)


def test_no_round_in_the_code() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}: {ref!r}"
        for p in python_files(SCANNED, ())
        for line, ref in round_refs(p.read_text(encoding="utf-8"))
    ]
    assert not found, "cite a decision id (docs/decisions) instead:\n" + "\n".join(found)
