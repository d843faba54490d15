"""A user-style benchmark: a folder of PyAV-made mp4 clips and items naming them by file name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from benchcheck.cli import main
from benchcheck.video.synth import make_test_video

N_CLIPS = 3
LETTERS_FLAT = [{"match": "", "letters": {"A": -1.2, "B": -1.2, "C": -1.2}}]  # never sure: nothing removed


def make_clips(folder: Path, n: int = N_CLIPS) -> list[Path]:
    """Clips of different lengths (so different bytes and video_ids), over 32 stored frames at 2 fps."""
    return [make_test_video(folder / f"clip{i}.mp4", 36 + 2 * i, fps=2.0, width=128, height=72) for i in range(n)]


def item(k: int, video: str | None, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"item_id": f"q{k}", "question": f"What happens in clip {k}?",
                           "options": ["it turns", "it stops", "it falls"], "answer": k % 3, **extra}
    if video is not None:
        row["video"] = video
    return row


def write_items(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_rules(path: Path) -> Path:
    path.write_text(json.dumps(LETTERS_FLAT))
    return path


def bc(*args: str | Path) -> Result:
    """``benchcheck ARGS`` in-process (stdout and stderr apart)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
