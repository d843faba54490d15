"""A key clash in `videos normalize` (two source folders of the same name) fails its file on a
`failed:` line and exits 1, but writes no `failures.jsonl` row: that file is keyed by the key,
which the kept file holds. The video page said failures.jsonl has a row "for every source that
could not be normalized" and did not say a clash is the exception."""

from __future__ import annotations

from docs_text import DOCS


def test_the_page_says_a_key_clash_has_no_failures_row() -> None:
    """What the program does is asserted in tests/video/test_audit_videos_key_clash.py."""
    page = " ".join((DOCS / "video.md").read_text().split())
    bullet = page[page.index("* one key per file name within a run"):]
    bullet = bullet[:bullet.index(" * ")]
    assert "no `failures.jsonl` row" in bullet
