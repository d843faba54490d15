"""A key clash in `videos normalize` (two source folders of the same name) fails its file on a
`failed:` line and exits 1, but writes no `failures.jsonl` row: that file is keyed by the key,
which the kept file holds. The video page said failures.jsonl has a row "for every source that
could not be normalized" and did not say a clash is the exception."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from docs_text import DOCS

from benchcheck.cli import main
from benchcheck.video.index import FAILURES_FILE
from benchcheck.video.synth import make_test_video


def test_a_key_clash_has_no_failures_row_and_the_page_says_so(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "clips", tmp_path / "b" / "clips"
    make_test_video(a / "x.mp4", 4, fps=2.0, width=64, height=36)
    make_test_video(b / "x.mp4", 6, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(a), str(b), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1 and "failed: " in res.output
    failures = store / FAILURES_FILE
    assert not failures.exists() or failures.read_text() == ""
    page = " ".join((DOCS / "video.md").read_text().split())
    bullet = page[page.index("* one key per file name within a run"):]
    bullet = bullet[:bullet.index(" * ")]
    assert "no `failures.jsonl` row" in bullet
