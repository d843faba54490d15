"""Frame plans: which stored frames a condition shows, in which order, at which size (pure).

A plan is chosen by name (:func:`parse_plan`) and applied to a normalized video's stored frame
timestamps (:func:`plan_frames`). Names:

=====================  ==========================================================  ============
name                   frames                                                      size
=====================  ==========================================================  ============
``v32``                32-frame time-uniform grid (screening steps 3, 5, 6)        long 448
``mid``                ``grid32[16]``, the middle frame (screening step 2)         long 448
``v_1``                ``grid32[16]``                                              storage
``v_<N>``              N-frame time-uniform grid                                   storage
``v_<N>_s<S>``         N-frame time-uniform grid                                   short S
``v_fps<F>_s<S>``      nearest stored frame to an F-fps grid, de-duplicated,       short S
                       capped at ``N_max`` (re-sampled time-uniformly)
=====================  ==========================================================  ============

Aliases without the ``v_`` prefix are accepted (``fps1_s224``, ``32_s224``, ``1``). The canonical
name (the frame cache's) writes each number in its shortest form: ``v_4_s0224`` is ``v_4_s224``,
``v_fps01.0`` is ``v_fps1``.

**Time-uniform grid of N frames** over stored timestamps ``t_0 <= ... <= t_{n-1}``: split
``[t_0, t_{n-1}]`` into N equal segments and take, for segment i, the stored frame nearest to
its centre ``c_i = t_0 + (i + 0.5) * (t_{n-1} - t_0) / N`` (a tie goes to the earlier frame).
With N = n uniform frames this returns every frame once; with N > n frames repeat, so position
i always means the same fraction of the video and ``grid32[16]`` is always the middle frame.
Example: 2 fps timestamps ``0, 0.5, ..., 9.5`` (20 frames), N = 4: centres 1.1875, 3.5625,
5.9375, 8.3125 s -> indices ``[2, 7, 12, 17]``. Sweep grids with N > 32 (``v_128_s224``) send
all stored frames instead when the video has fewer than N (``capped=True``, docs/PROTOCOL.md, "Frame plans").

**fps grid** at F fps: targets ``t_0 + j / F`` for j = 0, 1, ... while ``<= t_{n-1}``; each
takes the nearest stored frame; repeats are dropped (``n_grid`` frames remain). The context
cap ``N_max = min(max_images, floor((token_budget - 1500) / tokens_per_frame))`` with
``tokens_per_frame = ceil(w/32) * ceil(h/32) + 6`` at the plan's output size (97 for 16:9 at
short side 224, so ``N_max = 582``); a frame below Qwen3-VL's minimum area (65,536 pixels) counts
the tokens of the size the processor upscales it to, when that is more. When ``n_grid > N_max``
the de-duplicated frames are re-sampled with the time-uniform grid of ``N_max`` over their own
timestamps (repeats dropped again): ``capped_ctx=True`` and ``n_frames_used`` frames are shown.

**Sizes** keep the aspect ratio and never upscale: ``long 448`` scales the longer side to 448,
``short S`` the shorter side to S (the other side rounded half up); ``storage`` keeps the
stored size.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from benchcheck.imagesize import QWEN3_VL_FACTOR, QWEN3_VL_MAX_PIXELS, QWEN3_VL_MIN_PIXELS, processor_size
from benchcheck.protocol import shuffled_order

GRID32 = 32
MID_POSITION = 16
FRAME_LONG_SIDE = 448
TOKEN_BUDGET = 58000
PROMPT_RESERVE = 1500
# The highest fps a plan may name: a common source's highest rate. The store keeps fewer frames a
# second, so a higher rate only repeats stored frames, and its grid of ticks grows with the rate
# (an unbounded one never finished building).
MAX_PLAN_FPS = 60
MAX_IMAGES = 1024
SWEEP_SHORT_SIDES = (168, 224, 336, 448)

SizeMode = Literal["long", "short", "storage"]
PlanKind = Literal["grid", "mid", "fps"]


@dataclass(frozen=True, slots=True)
class SizeTarget:
    """How frames are resized: the long side, the short side, or the stored size."""

    mode: SizeMode
    px: int | None = None

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """(w, h) after resizing a ``width x height`` frame; never larger than the input."""
        px = self.px
        if self.mode == "storage" or px is None:
            return width, height
        ref = max(width, height) if self.mode == "long" else min(width, height)
        if px >= ref:
            return width, height
        scale = px / ref

        def side(v: int) -> int:
            return px if v == ref else max(1, math.floor(v * scale + 0.5))

        return side(width), side(height)

    def describe(self) -> dict[str, int | None]:
        return {"long_side": self.px if self.mode == "long" else None,
                "short_side": self.px if self.mode == "short" else None}


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """A parsed plan name."""

    name: str
    kind: PlanKind
    size: SizeTarget
    n: int = GRID32
    fps: float | None = None
    all_if_short: bool = False


@dataclass(frozen=True, slots=True)
class FramePlan:
    """The frames one plan shows for one video.

    ``positions[j]`` is the grid position of the j-th frame sent (the ``k`` of
    ``frame_<k>.jpg``); ``indices[j]`` the stored frame index; ``timestamps[j]`` its time in
    seconds; every frame is resized to ``width x height``.
    """

    plan: str
    positions: tuple[int, ...]
    indices: tuple[int, ...]
    timestamps: tuple[float, ...]
    width: int
    height: int
    n_stored: int
    size: SizeTarget
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def unique_indices(self) -> list[int]:
        return sorted(set(self.indices))

    def record(self) -> dict[str, Any]:
        """What a result row or ``frames.json`` records about the plan."""
        return {"plan": self.plan, **self.size.describe(), "n_stored": self.n_stored,
                "positions": list(self.positions), "indices": list(self.indices),
                "timestamps": [round(t, 6) for t in self.timestamps], **self.extra}


_GRID = re.compile(r"^(\d+)(?:_s(\d+))?$")
_FPS = re.compile(r"^fps(\d+(?:\.\d+)?)(?:_s(\d+))?$")


def parse_plan(name: str) -> PlanSpec:
    """The plan of a name (see the module doc); ``ValueError`` for an unknown name."""
    if name == "v32":
        return PlanSpec("v32", "grid", SizeTarget("long", FRAME_LONG_SIDE))
    if name == "mid":
        return PlanSpec("mid", "mid", SizeTarget("long", FRAME_LONG_SIDE))
    body = name[2:] if name.startswith("v_") else name
    if body == "blind":
        raise ValueError("plan v_blind shows no frames")
    m = _GRID.match(body)
    if m:
        n, s = int(m.group(1)), m.group(2)
        size = _short_side(name, s)
        canonical = f"v_{n}" + _size_suffix(size)
        if n < 1:
            raise ValueError(f"plan {name!r}: a grid needs at least one frame")
        if n == 1:
            return PlanSpec(canonical, "mid", size)
        return PlanSpec(canonical, "grid", size, n=n, all_if_short=n > GRID32)
    m = _FPS.match(body)
    if m:
        fps, s = float(m.group(1)), m.group(2)
        if not 0 < fps <= MAX_PLAN_FPS:
            raise ValueError(f"plan {name!r}: fps must be above 0 and at most {MAX_PLAN_FPS}")
        size = _short_side(name, s)
        canonical = f"v_fps{_number_name(fps)}" + _size_suffix(size)
        return PlanSpec(canonical, "fps", size, fps=fps)
    raise ValueError(f"unknown frame plan {name!r} (try v32, mid, v_1, v_32_s224, v_fps1_s224)")


def _short_side(name: str, s: str | None) -> SizeTarget:
    """The size of a plan's ``_s<S>`` suffix (the stored size without one). A zero short side was
    taken, and every video then failed on its own line with a decoder's or the aspect check's
    error that never named the plan."""
    if not s:
        return SizeTarget("storage")
    if int(s) < 1:
        raise ValueError(f"plan {name!r}: the short side (_s) must be at least 1 pixel")
    return SizeTarget("short", int(s))


def _size_suffix(size: SizeTarget) -> str:
    """The ``_s<S>`` of a canonical name, from the number: the name's own digits kept leading
    zeros, so one plan had as many frame-cache names as spellings."""
    return f"_s{size.px}" if size.mode == "short" else ""


def _number_name(x: float) -> str:
    """``x`` in the fewest digits that read back as the same float, positional (the plan grammar
    has no exponent), without a trailing ``.0``: every spelling of one fps gets one name."""
    text = format(Decimal(repr(x)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def nearest_index(timestamps: Sequence[float], t: float) -> int:
    """Index of the stored frame nearest to time ``t`` (ties go to the earlier frame)."""
    j = bisect.bisect_left(timestamps, t)
    if j == 0:
        return 0
    if j >= len(timestamps):
        return len(timestamps) - 1
    return j if timestamps[j] - t < t - timestamps[j - 1] else j - 1


def uniform_grid(timestamps: Sequence[float], n: int) -> list[int]:
    """The time-uniform grid of ``n`` positions (module doc); repeats when ``n > len``."""
    if not timestamps:
        raise ValueError("a video with no stored frames has no grid")
    t0, span = timestamps[0], timestamps[-1] - timestamps[0]
    return [nearest_index(timestamps, t0 + (i + 0.5) * span / n) for i in range(n)]


def dedup(indices: Iterable[int]) -> list[int]:
    """Drop repeated indices, keeping the first occurrence's order."""
    return list(dict.fromkeys(indices))


def fps_grid(timestamps: Sequence[float], fps: float) -> list[int]:
    """Nearest stored frame to each tick of an ``fps`` grid from the first frame, de-duplicated."""
    if not timestamps:
        raise ValueError("a video with no stored frames has no grid")
    t0, last = timestamps[0], timestamps[-1]
    ticks = math.floor((last - t0) * fps + 1e-9) + 1
    return dedup(nearest_index(timestamps, t0 + j / fps) for j in range(ticks))


def tokens_per_frame(width: int, height: int) -> int:
    """Visual tokens of one frame in the sweep's budget: ``ceil(w/32) * ceil(h/32) + 6`` (seed
    001), or, for a frame below Qwen3-VL's minimum area, the tokens of the size its processor
    upscales it to (+ 6), whichever is more. From that minimum up the seed's count is never below
    the processor's (ceil against round), so only frames the processor enlarges change: a
    176 x 144 frame is 78 tokens, not 36, and the seed's count let 1,024 of them (80,000 tokens)
    past a 65,536-token context. ``ValueError`` for a frame the processor refuses (too elongated)."""
    seed = math.ceil(width / 32) * math.ceil(height / 32) + 6
    h, w = processor_size(height, width, QWEN3_VL_FACTOR, QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS)
    return max(seed, (h // QWEN3_VL_FACTOR) * (w // QWEN3_VL_FACTOR) + 6)


def n_max(width: int, height: int, token_budget: int = TOKEN_BUDGET, max_images: int = MAX_IMAGES) -> int:
    """Frames the context holds: ``min(max_images, floor((budget - 1500) / tokens_per_frame))``."""
    return min(max_images, (token_budget - PROMPT_RESERVE) // tokens_per_frame(width, height))


def plan_frames(spec: PlanSpec | str, timestamps: Sequence[float], width: int, height: int,
                token_budget: int = TOKEN_BUDGET, max_images: int = MAX_IMAGES) -> FramePlan:
    """Apply a plan to a stored video (its frame timestamps and stored size)."""
    if isinstance(spec, str):
        spec = parse_plan(spec)
    ts = list(timestamps)
    if any(b < a for a, b in itertools.pairwise(ts)):
        raise ValueError("stored frame timestamps are not increasing")
    w, h = spec.size.output_size(width, height)
    extra: dict[str, Any] = {}
    if spec.kind == "mid":
        positions = [MID_POSITION]
        indices = [uniform_grid(ts, GRID32)[MID_POSITION]]
    elif spec.kind == "grid":
        if spec.all_if_short and len(ts) < spec.n:
            indices = list(range(len(ts)))
            extra["capped"] = True
        else:
            indices = uniform_grid(ts, spec.n)
            if spec.all_if_short:
                extra["capped"] = False
        positions = list(range(len(indices)))
    else:
        assert spec.fps is not None
        grid = fps_grid(ts, spec.fps)
        cap = n_max(w, h, token_budget, max_images)
        if max_images < 1:
            raise ValueError(f"max_images {max_images} leaves no room for one frame")
        if cap < 1:  # zero frames would answer a visual condition blind, recorded as if it had seen the video
            raise ValueError(f"token budget {token_budget} leaves no room for one {w}x{h} frame "
                             f"({tokens_per_frame(w, h)} tokens after the {PROMPT_RESERVE}-token reserve)")
        indices = grid
        if len(grid) > cap:
            picks = uniform_grid([ts[i] for i in grid], cap)
            indices = dedup(grid[p] for p in picks)
        positions = list(range(len(indices)))
        extra = {"capped_ctx": len(grid) > cap, "n_grid": len(grid), "n_max": cap,
                 "n_frames_used": len(indices), "tokens_per_frame": tokens_per_frame(w, h)}
    return FramePlan(spec.name, tuple(positions), tuple(indices), tuple(ts[i] for i in indices),
                     w, h, len(ts), spec.size, extra)


def shuffle_plan(plan: FramePlan, item_id: str) -> FramePlan:
    """The plan's frames in step 5's seeded per-item order (``protocol.shuffled_order``)."""
    order = shuffled_order(item_id, len(plan.indices))
    return replace(plan, positions=tuple(plan.positions[j] for j in order),
                   indices=tuple(plan.indices[j] for j in order),
                   timestamps=tuple(plan.timestamps[j] for j in order),
                   extra={**plan.extra, "shuffle_order": order})
