"""The README (issue 41): short, plain words, links that resolve, and no topic said twice."""

from __future__ import annotations

import re
import struct

from docs_text import DOCS, LONG, README, ROOT, pages, sentences

# Words only the team knows (where the code came from, the internal rounds and issues).
TEAM_WORDS = ("this machine's disk", "the origin", "seed 00", "the seeds", "spec section", "spec:",
              "issue 1", "issue 2", "issue 3", "issue 4", "round 1", "round 2", "round 3", "round 4",
              "round 5", "round 6", "round 7", "round 8", "round 9", "dev vm", "helper")


def test_readme_is_at_most_15_kb() -> None:
    assert README.stat().st_size <= 15_000, README.stat().st_size


def test_readme_has_no_team_words() -> None:
    text = README.read_text().casefold()
    assert [w for w in TEAM_WORDS if w in text] == []


def test_readme_keeps_its_two_commands_and_the_makefile_has_them() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test", "docs"):
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_readme_links_resolve_and_its_picture_is_a_small_png() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []
    png = ROOT / "docs" / "img" / "report.png"
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert 400 <= width <= 1600 and 200 <= height <= 1200, (width, height)
    assert png.stat().st_size < 100_000
    # every page the README links to is a page of the site, and the site's main pages are linked
    linked = {link.removeprefix("docs/") for link in local if link.startswith("docs/") and link.endswith(".md")}
    for page in ("getting-started.md", "screening.md", "PROTOCOL.md", "reference/cli.md", "PERFORMANCE.md"):
        assert page in linked, page


def test_no_long_sentence_is_both_in_the_readme_and_a_docs_page() -> None:
    readme = sentences(README.read_text())
    assert len(readme) > 10  # the splitter sees the README's prose
    shared = {p.relative_to(DOCS).as_posix(): sorted(readme & sentences(p.read_text())) for p in pages()}
    assert {k: v for k, v in shared.items() if v} == {}, f"said twice (> {LONG} characters)"


def test_the_shared_sentence_check_catches_a_copied_sentence() -> None:
    page = (DOCS / "screening.md").read_text()
    long_one = next(s for s in sorted(sentences(page)) if not s.startswith(("|", "`", "benchcheck")))
    readme_with_copy = README.read_text() + "\n\n" + long_one + "\n"
    assert long_one in sentences(readme_with_copy) & sentences(page)


def test_no_long_sentence_is_on_two_docs_pages() -> None:
    """Each topic lives on one page. The performance page and the decision records are left out:
    a record quotes the numbers it chose from."""
    found = {p.relative_to(DOCS).as_posix(): sentences(p.read_text()) for p in pages()
             if p.name != "PERFORMANCE.md" and "decisions" not in p.relative_to(DOCS).parts}
    names = sorted(found)
    shared = {(a, b): sorted(found[a] & found[b]) for i, a in enumerate(names) for b in names[i + 1:]}
    assert {k: v for k, v in shared.items() if v} == {}


def test_the_options_table_names_the_nested_shard_and_the_new_row_fields() -> None:
    """The README lists options and output fields beside the others of their kind: the nested shard
    `screen` and `launch`'s clients take, run_log's `shard_spec`, and the fields a gold conflict's
    line in step0_removed.jsonl adds."""
    rows = {line.split(" | ")[0]: line for line in README.read_text().splitlines() if line.startswith("| `")}
    shard = next((row for head, row in rows.items() if head.startswith("| `--shard")), "")
    assert "i/n:j/m" in shard and "`screen`" in shard and "`launch`" in shard
    assert "`shard_spec`" in rows.get("| `results/run_log.jsonl`", "")
    removed = rows.get("| `OUT/step0_removed.jsonl`", "")
    assert all(f"`{field}`" in removed for field in ("gold_text", "duplicate_gold_text", "match"))
