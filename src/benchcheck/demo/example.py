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


class ExampleExists(Exception):
    """The folder holds a ``mybench.jsonl`` that is not the example's: the user's edits are kept."""


def write_example(out: Path, n_items: int = 8) -> tuple[Path, Path]:
    """``out/videos/clip<i>.mp4`` and ``out/mybench.jsonl``; returns (videos folder, items file).

    A file already there is never replaced: the README has the user edit the example in place,
    and a second ``init --example`` into the same folder wiped those edits. A rerun over the
    example's own files is a no-op; an item file that differs raises ``ExampleExists``."""
    videos = out / "videos"
    rows = [{"item_id": f"example_{k}", "question": f"Which shape crosses the screen in clip {k % N_CLIPS}?",
             "options": ["a red ball", "a blue square", "a green triangle", "nothing"],
             "answer": ["a red ball", "a blue square", "a green triangle", "nothing"][k % 4],
             "video": f"clip{k % N_CLIPS}.mp4"} for k in range(n_items)]
    items = out / "mybench.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if items.exists() and items.read_bytes() != text.encode():
        raise ExampleExists(f"{items} exists and is not the example's (edited?): it is kept; "
                            "give --example another folder")
    for i in range(N_CLIPS):
        clip = videos / f"clip{i}.mp4"
        if not clip.exists():
            # Clips of different lengths have different bytes, so each is its own video_id.
            make_test_video(clip, CLIP_FRAMES + 2 * i, fps=2.0, width=160, height=90)
    if not items.exists():
        write_text_atomic(items, text)
    return videos, items
