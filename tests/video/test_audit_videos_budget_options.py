"""``--max-images`` below one and a ``--token-budget`` no larger than the prompt reserve leave no
room for any frame: they were taken, and ``frames extract`` failed every video of an fps plan on
its own line (for ``--max-images 0`` blaming the token budget) and wrote each to failures.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.plans import plan_frames
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("budget")
    make_test_video(root / "src" / "a.mp4", 4, fps=2.0, width=64, height=36)
    normalize_videos([root / "src"], root / "store")
    return root / "store"


@pytest.mark.parametrize("option", [["--max-images", "0"], ["--max-images", "-1"], ["--token-budget", "1500"]])
def test_frames_extract_refuses_a_budget_without_room(store: Path, tmp_path: Path, option: list[str]) -> None:
    out = tmp_path / "frames"
    res = CliRunner().invoke(main, ["frames", "extract", "--store", str(store), "--plan", "v_fps1_s224",
                                    "--out", str(out), "--no-progress", *option])
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option[0]}'" in res.output and "failed:" not in res.output
    assert not (out / "failures.jsonl").exists()


def test_no_images_is_named_as_such() -> None:
    with pytest.raises(ValueError, match="max_images 0"):
        plan_frames("v_fps1_s224", [0.0, 0.5, 1.0], 64, 36, max_images=0)
