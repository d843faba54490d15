"""A ``failed:`` line stays one line whatever the file's name: a name with a line break made one
failure print as two lines, the second looking like a failure of its own. Such a name is said as
its ``repr``, the quoting every ``{name!r}`` in the project's messages uses; a plain name is
printed as it is."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.errors import shown
from benchcheck.video.synth import make_test_video


def test_a_name_with_a_line_break_keeps_its_failure_on_one_line(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    whole = make_test_video(tmp_path / "whole.mp4", 20, fps=10.0, width=64, height=36).read_bytes()
    odd = raw / "cut\nfailed: other.mp4: not a readable video.mp4"
    plain = raw / "plain cut.mp4"
    raw.mkdir()
    for p in (odd, plain):
        p.write_bytes(whole[: len(whole) // 2])  # its index (at the end) cut off
    gone, target = raw / "gone.mp4", tmp_path / "deleted\nfile.mp4"
    os.symlink(target, gone)
    make_test_video(raw / "ok.mp4", 4, fps=2.0, width=64, height=36)
    res = CliRunner().invoke(main, ["videos", "normalize", str(raw), "--store", str(tmp_path / "store"),
                                    "--no-progress"])
    assert res.exit_code == 1, res.output
    assert "1 normalized" in res.output and "3 failed" in res.output
    failed = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert len(failed) == 3, res.output
    for name in (repr(str(odd)), str(plain), str(gone)):
        assert sum(x.startswith(f"failed: {name}: ") for x in failed) == 1, (name, failed)
    [link] = [x for x in failed if x.startswith(f"failed: {gone}: ")]
    assert link == f"failed: {gone}: a link to {str(target)!r}, which does not exist (or loops)"


def test_shown_quotes_only_what_does_not_print() -> None:
    assert shown("raw/clip one.mp4") == "raw/clip one.mp4"
    assert shown("a\nb.mp4") == "'a\\nb.mp4'"
    assert shown(os.fsdecode(b"caf\xe9.mp4")) == "'caf\\udce9.mp4'"
