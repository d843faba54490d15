"""``benchcheck init --example``: a tiny benchmark in the shape a lab brings its own, to copy.

A folder of PyAV-made mp4 clips and an item file (``mybench.jsonl``: the file name is the
benchmark's name) whose ``video`` fields are the clips'
plain file names (paths relative to the videos folder). The clips paint their frame index as a
black/white code (``video.synth``); the questions are placeholders: the point is the format.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchcheck.atomic import write_text_atomic
from benchcheck.video.synth import make_test_video

N_CLIPS = 4
# Over 32 stored frames at 2 fps (17 s or more), so no sweep condition is NA for being too short.
CLIP_FRAMES = 36


def write_example(out: Path, n_items: int = 8) -> tuple[Path, Path]:
    """``out/videos/clip<i>.mp4`` and ``out/mybench.jsonl``; returns (videos folder, items file)."""
    videos = out / "videos"
    for i in range(N_CLIPS):
        # Clips of different lengths have different bytes, so each is its own video_id.
        make_test_video(videos / f"clip{i}.mp4", CLIP_FRAMES + 2 * i, fps=2.0, width=160, height=90)
    rows = [{"item_id": f"example_{k}", "question": f"Which shape crosses the screen in clip {k % N_CLIPS}?",
             "options": ["a red ball", "a blue square", "a green triangle", "nothing"],
             "answer": ["a red ball", "a blue square", "a green triangle", "nothing"][k % 4],
             "video": f"clip{k % N_CLIPS}.mp4"} for k in range(n_items)]
    items = out / "mybench.jsonl"
    write_text_atomic(items, "".join(json.dumps(r) + "\n" for r in rows))
    return videos, items
