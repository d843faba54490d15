"""Item kinds whose answerability is known by construction, and what each step should do to them.

One rule, :func:`answerable`, says whether an item of a kind can be answered from what a request
shows (the question or not, how many frames, at which short side, in order or shuffled). The
screening funnel (:func:`predicted_step`), the sweep's expected accuracies and the expected
verdicts (:func:`expected_verdicts`) are all derived from it and from the benchmarks' mixes, so
the demo compares what the pipeline did with what the construction predicts. docs/demo.md
writes the tables out.

Kinds (docs/demo.md has an example of each):

=================  =============================================================================
``text_leak``      the question names the answer ("The ball at the bottom is red. What colour...")
``options_only``   one option is a real word, the other three are nonsense
``static``         the large block's colour: any single frame shows it
``ordered``        which colour came first / which way the ball moves: several frames, in order
``brief``          the colour of a one-frame flash: the 32-frame grid holds it, 1 and 8 frames miss it
``high_res``       the corner of a 2x2-px dot: seen at short side 336 and 448, lost at 224 and 168
``duplicate``      an exact copy of an item of an earlier benchmark: step 0 removes it
``mislabelled``    the ball's colour, with a wrong gold: every view that shows the ball shows another
                   option, so no step removes it and the label flags should name it
``longest``        a sound for the clip: no view answers it; the gold is always the longest option,
                   a pattern the text-only probe learns (and no single blind forward finds)
=================  =============================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from benchcheck.screen.steps import DEFAULT_CHAIN

KINDS = ("text_leak", "options_only", "static", "ordered", "brief", "high_res", "duplicate", "mislabelled",
         "longest")
# What a kind needs: the rows' and ground truth's plain-words label.
NEEDS = {
    "text_leak": "the question text",
    "options_only": "the options alone",
    "static": "any one frame",
    "ordered": "several frames in order",
    "brief": "enough frames (a one-frame event)",
    "high_res": "high resolution (short side >= 336)",
    "duplicate": "nothing new (a copy of another item)",
    "mislabelled": "nothing: its gold is wrong (the clip shows another option)",
    "longest": "nothing a model sees (its gold is always the longest option: a text pattern)",
}
HIGH_RES_MIN_SHORT = 336  # the dot keeps full contrast from here up (scenes module doc)
BRIEF_MIN_FRAMES = 32  # grids of 32 frames or more (or all 40 stored frames) hold the flash
STORAGE_SHORT = 448
SCREEN_SHORT = 224  # the screening grid: 448 px long side of a 2:1 clip


@dataclass(frozen=True, slots=True)
class View:
    """What one request shows: the question or not, frames, their short side, their order."""

    question: bool = True
    n_frames: int = 0
    short_side: int = SCREEN_SHORT
    in_order: bool = True


# What each screening step shows (SPEC section 3) on the demo's 2:1 clips.
STEP_VIEWS: dict[int, View] = {
    1: View(),
    2: View(n_frames=1),
    3: View(n_frames=32),
    4: View(question=False),
    5: View(n_frames=32, in_order=False),
    6: View(n_frames=32),
}
# The sweep conditions the demo checks (SPEC section 5).
SWEEP_VIEWS: dict[str, View] = {
    "v_blind": View(),
    "v_1": View(n_frames=1, short_side=STORAGE_SHORT),
    "v_8_s224": View(n_frames=8, short_side=224),
    "v_32_s168": View(n_frames=32, short_side=168),
    "v_32_s224": View(n_frames=32, short_side=224),
    "v_32_s448": View(n_frames=32, short_side=STORAGE_SHORT),
    "v_128_s224": View(n_frames=128, short_side=224),
}


def answerable(kind: str, view: View) -> bool:
    """Whether a request showing ``view`` holds what an item of ``kind`` needs (the construction)."""
    if kind == "mislabelled":
        return False  # a view that shows the ball shows the true answer, which is not the gold
    if kind == "longest":
        return False  # nothing in any view says which sound; only the option lengths do
    if kind == "options_only":
        return True
    if kind == "text_leak":
        return view.question
    if not view.question:
        return False
    if kind in ("static", "duplicate"):
        return view.n_frames >= 1
    if kind == "ordered":
        return view.n_frames >= 2 and view.in_order
    if kind == "brief":
        return view.n_frames >= BRIEF_MIN_FRAMES
    if kind == "high_res":
        return view.n_frames >= 1 and view.short_side >= HIGH_RES_MIN_SHORT
    raise ValueError(f"unknown item kind {kind!r}")


def answering_steps(kind: str) -> list[int]:
    """The screening steps whose request holds what ``kind`` needs."""
    return [s for s, v in STEP_VIEWS.items() if answerable(kind, v)]


def predicted_step(kind: str, chain: Sequence[int] = DEFAULT_CHAIN, dedup: bool = True) -> int | None:
    """The step that removes an item of ``kind`` (0 = step-0 dedup), or None when it is kept.

    The reference engine is confident exactly when the request holds the answer, so an item
    goes at the first step of the chain that shows what it needs."""
    if kind == "duplicate" and dedup:
        return 0
    return next((s for s in chain if answerable(kind, STEP_VIEWS[s])), None)


def predicted_funnel(kinds: Iterable[str], chain: Sequence[int] = DEFAULT_CHAIN,
                     dedup: bool = True) -> dict[str, dict[str, int]]:
    """kind -> {"0".."6" step removed at, or "kept"} -> count, for the given items' kinds."""
    out: dict[str, dict[str, int]] = {}
    for kind in kinds:
        step = predicted_step(kind, chain, dedup)
        key = "kept" if step is None else str(step)
        row = out.setdefault(kind, {})
        row[key] = row.get(key, 0) + 1
    return out


# The benchmarks: kind -> count. Each is built so its sweep verdict is known.
MIXES: dict[str, dict[str, int]] = {
    "DemoPixels": {"high_res": 12, "static": 6, "text_leak": 3, "options_only": 3},
    "DemoFrames": {"brief": 12, "static": 6, "ordered": 6},
    "DemoBoth": {"high_res": 8, "brief": 8, "text_leak": 4, "ordered": 4},
    "DemoNeither": {"static": 8, "ordered": 8, "text_leak": 4, "options_only": 4, "mislabelled": 3, "duplicate": 4},
    "DemoShortcut": {"longest": 20},
}
VERDICT_MIN_SHARE = 0.2  # a benchmark "prefers" pixels (frames) when this share of it needs them


def expected_verdict(mix: dict[str, int]) -> str:
    """"pixels", "frames", "both" or "neither", from the share of items that need pixels
    (``high_res``: 32 frames at short side 448 see them, at 168 not) and frames (``brief``:
    128 frames at 224 see them, 8 not)."""
    n = sum(mix.values())
    pixels = mix.get("high_res", 0) / n >= VERDICT_MIN_SHARE
    frames = mix.get("brief", 0) / n >= VERDICT_MIN_SHARE
    return {(True, True): "both", (True, False): "pixels", (False, True): "frames"}.get((pixels, frames), "neither")


def expected_verdicts() -> dict[str, str]:
    """The sweep verdict each demo benchmark is built to get (the demo prints the real sweep's beside it)."""
    return {bench: expected_verdict(mix) for bench, mix in MIXES.items()}
