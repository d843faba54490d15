"""The demo's known-answer benchmarks: items of each kind over the synthetic scenes, and their
ground truth (``ground_truth.jsonl``) for the audit and the tests.

Each (scene, kind) pair is used once, so no two items share a video and a question except the
planted duplicates; every item records its kind in ``task`` and ``meta.kind``. Gold positions
cycle through A-D within each kind, so a flat (undecided) answer is right one time in four.
The ``longest`` items (benchmark DemoShortcut) plant a text pattern: no view answers them, and
their gold is always the longest option, which the text-only probe learns and no single blind
forward of the reference engine finds. The ``mislabelled`` items carry a wrong gold (never at A,
so a flat answer is never right): the label flags should name them (``truth/probe_truth.json``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_text_atomic
from benchcheck.demo.kinds import KINDS, MIXES, NEEDS, answering_steps, expected_verdicts, predicted_step
from benchcheck.demo.scenes import CORNERS, Scene

NONSENSE = ("glorp", "vexil", "quibbit", "snarfle", "plimbo", "draxon", "wumble", "frindle", "zeptar", "morkel")
DIRECTIONS = ("left", "right", "up", "down")
GROUND_TRUTH = "ground_truth.jsonl"
PROBE_TRUTH = "probe_truth.json"
# The ``longest`` kind's options: sounds for a clip of coloured shapes (no view answers the question;
# every phrase has a word the reference engine does not know, so no option is "plausible" alone).
SOUNDS = ("hum", "a gong", "soft rain", "bells ringing", "a distant train whistle", "waves on pebbles",
          "birdsong at dawn", "a ticking clock", "crowd cheering in a stadium", "wind", "thunder rolling over hills",
          "a cat purring", "footsteps", "typing", "a kettle boiling on the stove", "violin")
MISLABELLED_FIRST_SCENE = 12  # scenes without a text_leak item (its question names the ball too)


@dataclass(frozen=True, slots=True)
class DemoItem:
    """One item and its construction (the kind and scene are never shown to an engine)."""

    item_id: str
    bench: str
    kind: str
    scene: int
    question: str
    options: tuple[str, ...]
    answer: int
    copy_of: str | None = None
    true_answer: int | None = None  # a mislabelled item's right option (its ``answer`` is wrong)

    def record(self, video_id: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"kind": self.kind, "scene": self.scene}
        if self.copy_of:
            meta["copy_of"] = self.copy_of
        return {"item_id": self.item_id, "bench": self.bench, "question": self.question,
                "options": list(self.options), "answer": self.answer, "video_id": video_id,
                "task": self.kind, "meta": meta}


def _place(gold: str, others: Sequence[str], pos: int, rng: random.Random) -> tuple[tuple[str, ...], int]:
    rest = list(others)
    rng.shuffle(rest)
    pos %= len(rest) + 1
    rest.insert(pos, gold)
    return tuple(rest), pos


def question_for(kind: str, scene: Scene, pos: int, rng: random.Random) -> tuple[str, tuple[str, ...], int]:
    """(question, options, gold index) of a ``kind`` item about ``scene``, gold at ``pos``."""
    absent = scene.absent
    if kind == "static":
        q, gold, others = "What colour is the large block on the left?", scene.static, absent[:3]
    elif kind == "text_leak":
        q = f"The ball at the bottom is {scene.ball}. What colour is the ball at the bottom?"
        gold, others = scene.ball, absent[:3]
    elif kind == "options_only":
        q, gold = "What is painted in the middle square at the start?", scene.first
        others = rng.sample(NONSENSE, 3)
    elif kind == "ordered" and scene.index % 2 == 0:
        q, gold, others = "Which colour appeared first in the middle square?", scene.first, [scene.second, *absent[:2]]
    elif kind == "ordered":
        q, gold = f"Which way does the {scene.ball} ball move?", scene.direction
        others = [d for d in DIRECTIONS if d != scene.direction]
    elif kind == "brief":
        q, gold = "Which colour flashed briefly at the top right?", scene.flash
        others = [scene.static, scene.second, absent[0]]
    elif kind == "high_res":
        q, gold = "Where is the tiny white dot?", scene.dot_corner
        others = [c for c in CORNERS if c != scene.dot_corner]
    elif kind == "mislabelled":
        q, gold, others = "What colour is the ball at the bottom?", scene.ball, absent[:3]
    elif kind == "longest":
        q = "Which sound would suit this clip best?"
        four = sorted(rng.sample(SOUNDS, 4), key=len)
        while len(four[-1]) == len(four[-2]):
            four = sorted(rng.sample(SOUNDS, 4), key=len)
        gold, others = four[-1], four[:3]
    else:
        raise ValueError(f"no question template for kind {kind!r}")
    options, answer = _place(gold, others, pos, rng)
    return q, options, answer


def wrong_gold(true: int, k: int, pos: int) -> int:
    """A mislabelled item's gold: another option than ``true``, never A (so a flat answer, which
    says A, is never right and the sweep's expectations need no exception)."""
    choices = [j for j in range(1, k) if j != true]
    return choices[pos % len(choices)]


def build_items(scenes: Sequence[Scene], mixes: Mapping[str, Mapping[str, int]] = MIXES,
                seed: int = 0) -> list[DemoItem]:
    """The benchmarks' items in pool order (benchmarks in ``mixes`` order: copies come last)."""
    rng = random.Random(f"demo-items|{seed}")
    next_scene = dict.fromkeys(KINDS, 0)
    made: dict[str, list[DemoItem]] = {}
    items: list[DemoItem] = []
    for bench, mix in mixes.items():
        i = 0
        for kind, count in mix.items():
            for _ in range(count):
                item_id = f"{bench}_{i}"
                i += 1
                if kind == "duplicate":
                    # An exact copy of an earlier benchmark's static item (same video, same text).
                    src = made["static"][next_scene[kind] % len(made["static"])]
                    next_scene[kind] += 1
                    items.append(DemoItem(item_id, bench, kind, src.scene, src.question, src.options, src.answer,
                                          copy_of=src.item_id))
                    continue
                s = next_scene[kind] + (MISLABELLED_FIRST_SCENE if kind == "mislabelled" else 0)
                next_scene[kind] += 1
                if s >= len(scenes):
                    raise ValueError(f"{bench}: {kind} needs more than {len(scenes)} scenes")
                q, opts, ans = question_for(kind, scenes[s], s, rng)
                true = None
                if kind == "mislabelled":
                    true, ans = ans, wrong_gold(ans, len(opts), s)
                item = DemoItem(item_id, bench, kind, s, q, opts, ans, true_answer=true)
                made.setdefault(kind, []).append(item)
                items.append(item)
    return items


def scenes_needed(mixes: Mapping[str, Mapping[str, int]] = MIXES) -> int:
    return max(sum(m.get(k, 0) for m in mixes.values()) + (MISLABELLED_FIRST_SCENE if k == "mislabelled" else 0)
               for k in KINDS if k != "duplicate")


def ground_truth_row(item: DemoItem, chain: Sequence[int], video_id: str | None) -> dict[str, Any]:
    """What the construction says about an item: its kind, what it needs, which steps can
    answer it, where the chain should remove it, and whether a removal there is justified.

    A removal by a step that cannot see what the item needs (say step 1 removing a ``static``
    item) is false by construction: it came from a prior, not from evidence."""
    steps = answering_steps(item.kind if item.kind != "duplicate" else "static")
    predicted = predicted_step(item.kind, chain)
    return {"item_id": item.item_id, "bench": item.bench, "kind": item.kind, "needs": NEEDS[item.kind],
            "scene": item.scene, "video_id": video_id, "answer": item.answer, "copy_of": item.copy_of,
            "answerable_without_video": item.kind in ("text_leak", "options_only"),
            "answerable_at_steps": steps, "predicted_step": predicted,
            "justified_removal_steps": [0] if item.kind == "duplicate" else steps,
            "wrong_gold": item.true_answer is not None, "true_answer": item.true_answer}


def probe_truth(items: Sequence[DemoItem]) -> dict[str, Any]:
    """What the probe and the label flags should find: the planted pattern and the wrong golds."""
    benches = sorted({it.bench for it in items if it.kind == "longest"})
    return {"planted_pattern": [{"bench": b, "pattern": "the gold is always the longest option",
                                 "items": sum(1 for it in items if it.bench == b)} for b in benches],
            "wrong_golds": [{"item_id": it.item_id, "bench": it.bench, "gold": chr(65 + it.answer),
                             "true_answer": chr(65 + it.true_answer)}
                            for it in items if it.true_answer is not None]}


def write_benchmarks(out: str | Path, items: Sequence[DemoItem], video_ids: Sequence[str | None],
                     chain: Sequence[int], truth_dir: str | Path | None = None) -> list[Path]:
    """One JSONL file per benchmark under ``out``; ``ground_truth.jsonl`` and
    ``expected_verdicts.json`` under ``truth_dir`` (default ``out/../truth``: outside the item
    folder, so loading that folder finds only items). ``video_ids[s]`` is scene ``s``'s video."""
    out = Path(out)
    truth = Path(truth_dir) if truth_dir is not None else out.parent / "truth"
    out.mkdir(parents=True, exist_ok=True)
    truth.mkdir(parents=True, exist_ok=True)
    by_bench: dict[str, list[str]] = {}
    rows = []
    for it in items:
        vid = video_ids[it.scene]
        by_bench.setdefault(it.bench, []).append(json.dumps(it.record(vid)))
        rows.append(json.dumps(ground_truth_row(it, chain, vid)))
    paths = []
    for bench, lines in by_bench.items():
        p = out / f"{bench}.jsonl"
        write_text_atomic(p, "\n".join(lines) + "\n")
        paths.append(p)
    write_text_atomic(truth / GROUND_TRUTH, "\n".join(rows) + "\n")
    write_text_atomic(truth / "expected_verdicts.json", json.dumps(expected_verdicts(), indent=1) + "\n")
    write_text_atomic(truth / PROBE_TRUTH, json.dumps(probe_truth(items), indent=1) + "\n")
    return paths
