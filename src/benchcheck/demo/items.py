"""A synthetic demo item pool that exercises the loaders' edge cases.

Three benchmarks in three formats: JSONL with sequential letter prefixes and mixed gold
encodings, a CSV in the NExT-QA layout, and Parquet with open-format items (more than 26
options). Each holds a few deliberately bad items, and items with and without a video.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_atomic
from benchcheck.items import key_video_id

COLORS = ["red", "blue", "green", "yellow", "purple", "orange", "white", "black"]
OBJECTS = ["ball", "car", "cup", "dog", "kite", "box", "chair", "lamp"]
ACTIONS = ["running", "jumping", "sitting", "waving", "cooking", "reading", "dancing", "walking"]


@dataclass(frozen=True, slots=True)
class DemoPool:
    """Where the demo files are and what they should hold."""

    paths: list[Path]
    n_rows: int
    n_bad: int
    n_open: int


def _question(rng: random.Random, i: int) -> tuple[str, list[str], int]:
    kind = i % 3
    if kind == 0:
        obj = rng.choice(OBJECTS)
        opts = rng.sample(COLORS, 4)
        return f"What color is the {obj} in the video?", opts, rng.randrange(4)
    if kind == 1:
        opts = rng.sample(ACTIONS, 4)
        return "What is the person doing?", opts, rng.randrange(4)
    n = rng.randrange(1, 6)
    opts = [str(v) for v in rng.sample(range(0, 9), 4)]
    gold = rng.randrange(4)
    opts[gold] = str(n) if str(n) not in opts else opts[gold]
    return f"How many {rng.choice(OBJECTS)}s appear?", opts, gold


def _video_for(rng: random.Random, video_ids: Sequence[str], i: int) -> str | None:
    """One item in ten shows a normalized video (the demo's visual steps stay quick), two in ten a
    video that is not normalized yet (``k:`` ids: no frames), the rest none."""
    r = i % 10
    if r == 0 and video_ids:
        return video_ids[(i // 10) % len(video_ids)]
    if r in (3, 7):
        return key_video_id(f"demo-repo::videos.zip::clip_{i % 7}.mp4")
    return None


def write_demo_items(out: str | Path, video_ids: Sequence[str] = (), seed: int = 0,
                     n_json: int = 120, n_csv: int = 100, n_parquet: int = 60) -> DemoPool:
    """Write ``DemoJson.jsonl``, ``DemoNext.csv`` and ``DemoOpen.parquet`` under ``out``.

    ``video_ids`` are content hashes of normalized demo videos (items cycle over them); without
    them, items name only not-yet-normalized (``k:``) videos or none.
    """
    rng = random.Random(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [_write_json(out / "DemoJson.jsonl", rng, video_ids, n_json),
             _write_csv(out / "DemoNext.csv", rng, n_csv),
             _write_parquet(out / "DemoOpen.parquet", rng, video_ids, n_parquet)]
    # bad: json 4 (+1 unparsable line), csv 2, parquet 1; open: parquet every 15th
    return DemoPool(paths, n_json + n_csv + n_parquet + 1, 8, len(range(0, n_parquet, 15)))


def _write_json(path: Path, rng: random.Random, video_ids: Sequence[str], n: int) -> Path:
    rows: list[dict[str, Any]] = []
    for i in range(n):
        q, opts, gold = _question(rng, i)
        answer: Any = gold
        if i % 4 == 1:
            answer = "ABCD"[gold]
        elif i % 4 == 2:
            answer = opts[gold]
        shown = [f"{'ABCD'[j]}. {o}" for j, o in enumerate(opts)] if i % 2 else opts
        rows.append({"item_id": f"DemoJson_{i}", "question": q, "options": shown, "answer": answer,
                     "video_id": _video_for(rng, video_ids, i), "task": ["color", "action", "count"][i % 3]})
    rows[5]["question"] = "   "                       # empty question
    rows[6]["options"] = ["only one"]                 # fewer than 2 options
    rows[7]["answer"] = 9                             # gold index out of range
    rows[8]["item_id"] = "DemoJson_0"                 # duplicate id
    with path.open("w", encoding="utf-8") as f:
        for j, r in enumerate(rows):
            f.write(json.dumps(r) + "\n")
            if j == 10:
                f.write('{"item_id": "DemoJson_torn", "question": "cut\n')  # a line that does not parse
    return path


def _write_csv(path: Path, rng: random.Random, n: int) -> Path:
    cols = ["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
            "a0", "a1", "a2", "a3", "a4"]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for i in range(n):
            act = rng.sample(ACTIONS, 5)
            gold = rng.randrange(5)
            if i == 3:
                gold = 7                                  # gold index out of range
            q = "why did the person stop?" if i != 4 else ""   # i == 4: empty question
            # qid numbers the questions within each video, as in NExT-QA: the id is video+qid
            w.writerow([f"{4000 + i // 4}", 300, 640, 480, q, gold, i % 4, "CW", *act])
    return path


def _write_parquet(path: Path, rng: random.Random, video_ids: Sequence[str], n: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i in range(n):
        if i % 15 == 0:
            q = f"At which second does event {i} happen?"
            opts = [f"second {s}" for s in range(30)]     # > 26 options: format=open
            gold: Any = rng.randrange(30)
        else:
            q, opts, g = _question(rng, i)
            gold = "ABCD"[g] if i % 2 else opts[g]
        rows.append({"item_id": f"DemoOpen_{i}", "bench": "DemoOpen", "question": q, "options": opts,
                     "answer": str(gold), "video_id": _video_for(rng, video_ids, i + 1)})
    rows[2]["answer"] = "not an option at all"           # gold text that matches no option
    write_atomic(path, lambda f: pq.write_table(pa.Table.from_pylist(rows), f))
    return path
