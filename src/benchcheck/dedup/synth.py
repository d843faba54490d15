"""A synthetic pool with planted duplicates, for measuring step 0 (recall, precision, items/s).

Questions come from templates with several phrasings; each video gets distinct questions. Then
copies are planted: exact (same text and video, same or another benchmark), near (another
phrasing, options reordered, case changed) and two kinds that must be kept: the same template
question over a different video, and its temporal opposite (after -> before) on the same video.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchcheck.dedup.verdict import ItemVerdict
from benchcheck.items import Item

_SUBJECTS = ("man", "woman", "boy", "girl", "child", "chef", "player", "driver", "teacher", "dancer", "nurse",
             "farmer", "student", "singer", "worker", "old man", "young woman", "referee", "painter", "pilot")
_OBJECTS = ("cup", "phone", "book", "ball", "knife", "bag", "hat", "bottle", "box", "guitar", "chair", "umbrella",
            "camera", "lamp", "bicycle", "towel", "pillow", "hammer", "basket", "candle", "kite", "laptop",
            "spoon", "wallet", "scarf")
_PLACES = ("kitchen", "park", "street", "beach", "office", "garden", "stage", "classroom", "garage", "forest",
           "market", "bedroom", "station", "library", "river bank")
_ACTIONS = ("running", "cooking", "dancing", "reading", "jumping", "swimming", "painting", "writing", "cleaning",
            "singing", "climbing", "sleeping", "laughing", "waving", "eating", "drinking", "typing", "sweeping")
_COLORS = ("red", "blue", "green", "black", "white", "yellow", "orange", "purple", "brown", "grey", "pink")
_REASONS = ("to meet a friend", "to buy food", "to find a lost item", "to take a photo", "to escape the rain",
            "to return a book", "to fix something", "to wait for a bus", "to rest for a while")

# (phrasings, answer vocabulary); slots {s} subject, {o} object, {p} place.
_TEMPLATES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("What is the {s} holding in the {p}?", "What does the {s} hold in the {p}?",
      "In the {p}, what is the {s} holding?"), _OBJECTS),
    (("What is the {s} doing in the {p}?", "What activity is the {s} doing in the {p}?",
      "In the {p}, what is the {s} doing?"), _ACTIONS),
    (("What color is the {o} that the {s} uses?", "What is the color of the {o} the {s} uses?"), _COLORS),
    (("Where does the {s} put the {o}?", "Where is the {o} put by the {s}?",
      "Where does the {s} place the {o}?"), _PLACES),
    (("What does the {s} do after picking up the {o}?", "After picking up the {o}, what does the {s} do?"),
     _ACTIONS),
    (("Why does the {s} go to the {p}?", "For what reason does the {s} go to the {p}?",
      "What is the reason the {s} goes to the {p}?"), _REASONS),
)
_CONTRAST_TEMPLATE = 4
NO_VIDEO_MAX = 1500  # "after picking up" has a temporal opposite: "before picking up"


@dataclass(frozen=True, slots=True)
class _Question:
    template: int
    s: str
    o: str
    p: str
    options: tuple[str, ...]

    def text(self, phrasing: int = 0) -> str:
        forms = _TEMPLATES[self.template][0]
        return forms[phrasing % len(forms)].format(s=self.s, o=self.o, p=self.p)


@dataclass(slots=True)
class SyntheticPool:
    """Items plus the truth: planted duplicate id -> original id, its kind, and must-keep ids."""

    items: list[Item] = field(default_factory=list)
    planted: dict[str, str] = field(default_factory=dict)
    planted_kind: dict[str, str] = field(default_factory=dict)
    must_keep: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class PoolScore:
    """Recall over planted duplicates, precision over removed items, and must-keep items lost."""

    planted: int
    found: int
    removed: int
    recall: float
    precision: float
    must_keep_removed: int
    recall_by_kind: dict[str, float]


def _question(rng: random.Random, template: int) -> _Question:
    vocab = _TEMPLATES[template][1]
    opts = tuple(rng.sample(vocab, rng.choice((4, 5))))
    return _Question(template, rng.choice(_SUBJECTS), rng.choice(_OBJECTS), rng.choice(_PLACES), opts)


def _reword(rng: random.Random, q: _Question) -> tuple[str, list[str], int]:
    """Another phrasing, options shuffled into a different order, sometimes lower-cased; and where
    the gold (the original's first option) went, since a copy is the same question with the same
    answer (a moved gold left at the first letter would be a gold conflict, not a copy)."""
    text = q.text(rng.randrange(1, 4))
    opts = list(q.options)
    while opts == list(q.options):
        rng.shuffle(opts)
    if rng.random() < 0.3:
        text = text.lower()
    return text, opts, opts.index(q.options[0])


def synthetic_pool(n: int, seed: int = 0, n_bench: int = 5, plant_rate: float = 0.15) -> SyntheticPool:
    """About ``n`` items over ``n_bench`` benchmarks (the last one without videos), of which
    ``plant_rate`` are planted copies (duplicates to find, and look-alikes to keep)."""
    rng = random.Random(seed)
    pool = SyntheticPool()
    benches = [f"syn{b}" for b in range(n_bench)]
    counters = dict.fromkeys(benches, 0)
    originals: list[tuple[Item, _Question]] = []

    def add(bench: str, question: str, options: Sequence[str], video: str | None, gold: int = 0) -> Item:
        item = Item(f"{bench}_{counters[bench]}", bench, question, tuple(options), gold, video)
        counters[bench] += 1
        pool.items.append(item)
        return item

    n_base = int(n * (1 - plant_rate))
    # The benchmark without videos is small (as in real pools), and its questions must differ
    # from each other: the templates hold a few thousand distinct questions.
    no_video = min(n_base // n_bench, NO_VIDEO_MAX)
    for b, bench in enumerate(benches):
        with_video = b < n_bench - 1
        per_bench = (n_base - no_video) // (n_bench - 1) if with_video else no_video
        made = 0
        v = 0
        seen: set[str] = set()  # question texts, per video; per benchmark without videos
        while made < per_bench:
            video = f"vid{b}_{v}" if with_video else None
            v += 1
            if with_video:
                seen = set()
            for _ in range(rng.randint(2, 6) if with_video else per_bench - made):
                q = _question(rng, rng.randrange(len(_TEMPLATES)))
                if q.text() in seen:
                    continue
                seen.add(q.text())
                originals.append((add(bench, q.text(), q.options, video), q))
                made += 1
    video_items = [(it, q) for it, q in originals if it.video_id]
    while len(pool.items) < n:
        it, q = rng.choice(originals)
        r = rng.random()
        # Cross copies go to a later benchmark, so the planted copy (not the original) is the one
        # the keep rule removes; the last benchmark with videos copies within itself.
        later = benches[benches.index(it.bench) + 1 : -1] if it.video_id else []
        other = rng.choice(later) if later else it.bench
        if r < 0.2:
            copy, kind = add(it.bench, it.question, it.options, it.video_id), "exact/within"
        elif r < 0.35:
            copy, kind = add(other, it.question, it.options, it.video_id), "exact/cross"
        elif r < 0.6:
            text, opts, gold = _reword(rng, q)
            copy, kind = add(it.bench, text, opts, it.video_id, gold), "near/within"
        elif r < 0.75:
            text, opts, gold = _reword(rng, q)
            copy, kind = add(other, text, opts, it.video_id, gold), "near/cross"
        elif r < 0.9 and it.video_id:
            donor = rng.choice(video_items)[0]
            if donor.video_id != it.video_id:
                pool.must_keep.add(add(it.bench, it.question, it.options, donor.video_id).item_id)
            continue
        else:
            if q.template == _CONTRAST_TEMPLATE:
                opposite = it.question.replace("after", "before").replace("After", "Before")
                pool.must_keep.add(add(it.bench, opposite, it.options, it.video_id).item_id)
            continue
        pool.planted[copy.item_id] = it.item_id
        pool.planted_kind[copy.item_id] = kind
    return pool


def score_pool(pool: SyntheticPool, verdicts: Sequence[ItemVerdict]) -> PoolScore:
    """Recall: planted copies removed; precision: removed items that were planted copies."""
    removed = {v.item.item_id for v in verdicts if not v.kept}
    found = removed & set(pool.planted)
    by_kind: dict[str, list[bool]] = {}
    for item_id, kind in pool.planted_kind.items():
        by_kind.setdefault(kind, []).append(item_id in removed)
    return PoolScore(
        planted=len(pool.planted),
        found=len(found),
        removed=len(removed),
        recall=len(found) / len(pool.planted) if pool.planted else 1.0,
        precision=len(found) / len(removed) if removed else 1.0,
        must_keep_removed=len(removed & pool.must_keep),
        recall_by_kind={k: sum(v) / len(v) for k, v in sorted(by_kind.items())},
    )
