"""A plan with a zero short side (``v_4_s0``, ``v_fps1_s0``) is refused when it is read: it was
taken, and ``frames extract`` then failed every video on its own line with an error that did not
name the plan ("Operation not supported", "aspect ratio of 1x0 is over 200")."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.plans import parse_plan
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video


@pytest.mark.parametrize("plan", ["v_4_s0", "v_1_s00", "fps1_s0"])
def test_zero_short_side_is_refused(plan: str) -> None:
    with pytest.raises(ValueError, match="short side"):
        parse_plan(plan)


def test_frames_extract_refuses_it_before_any_video(tmp_path: Path) -> None:
    make_test_video(tmp_path / "src" / "a.mp4", 4, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    normalize_videos([tmp_path / "src"], store)
    out = tmp_path / "frames"
    res = CliRunner().invoke(main, ["frames", "extract", "--store", str(store), "--plan", "v_4_s0", "--out",
                                    str(out), "--no-progress"])
    assert res.exit_code != 0 and "failed:" not in res.output
    assert "plan 'v_4_s0': the short side" in res.output
    assert not (out / "failures.jsonl").exists()
