"""A visual step reads each video's grid once for a chunk of items, whichever questions of it the
chunk holds; a broken frame folder stays the error of its own items."""

from __future__ import annotations

import json
from pathlib import Path

from benchcheck.items import load_items
from benchcheck.screen.frames import CacheFrames
from benchcheck.screen.steps import default_run_spec
from benchcheck.screen.task import ScoreTask
from benchcheck.video import plans
from benchcheck.video.cache import write_frames


class CountingCache(CacheFrames):
    """The project's frame cache, counting the grids it reads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def grid(self, video_id: str) -> list[bytes]:
        self.reads.append(video_id)
        return super().grid(video_id)


def write_pool(tmp: Path) -> tuple[Path, Path]:
    cache = tmp / "frames"
    n = plans.GRID32
    for vid in ("va", "vb"):
        write_frames(cache, vid, {"positions": list(range(n)), "files": [f"frame_{k}.jpg" for k in range(n)],
                                  "long_side": plans.FRAME_LONG_SIDE},
                     [f"{vid}{k}".encode() for k in range(n)])
    (cache / "vc").mkdir()  # a broken folder: no frames.json
    rows = [{"item_id": f"q{i}", "question": f"Question {i}?", "options": ["red", "green", "blue"], "answer": "A",
             "video_id": vid} for i, vid in enumerate(["va", "va", "vb", "vc", "va", "vb", "vc"])]
    items = tmp / "items"
    items.mkdir()
    (items / "B.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return items, cache


def test_each_video_grid_read_once_a_chunk(tmp_path: Path) -> None:
    items_dir, cache = write_pool(tmp_path)
    items = load_items([items_dir]).items
    for step in (2, 3):
        frames = CountingCache(cache)
        built = ScoreTask(default_run_spec(step), step, frames).build_now(items)
        ok = {it.item_id: b for it, b in built if not isinstance(b, str)}
        bad = {it.item_id: b for it, b in built if isinstance(b, str)}
        assert sorted(ok) == ["q0", "q1", "q2", "q4", "q5"] and sorted(bad) == ["q3", "q6"]
        assert all(msg.startswith("frames: FileNotFoundError") for msg in bad.values())
        # va and vb once each; the broken vc tried for each of its items (nothing to reuse)
        assert sorted(frames.reads) == ["va", "vb", "vc", "vc"]
        # the frames each item was built with are its own video's
        for it, b in built:
            if not isinstance(b, str):
                images = [img for r in b.requests for img in r.images]
                assert images and all(bytes(img).startswith(it.video_id.encode()) for img in images)
