"""Frames of a normalized video for a plan: decode what the plan needs, resize, JPEG-encode.

:func:`extract_jpegs` gives the frames straight from memory; :func:`extract_to_cache` writes
the same bytes to the frame cache. Both use :func:`frame_to_jpeg`: RGB conversion and the
resize in one swscale call (area filter, which antialiases; ``BITEXACT | ACCURATE_RND`` so
every machine makes the same pixels), then JPEG quality 85 with Pillow.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.protocol import JPEG_QUALITY
from benchcheck.video.cache import cache_satisfies, write_frames
from benchcheck.video.decode import DecodeStats, Strategy, decode_frames, display_turns
from benchcheck.video.meta import read_meta, video_path
from benchcheck.video.plans import (
    MAX_IMAGES,
    TOKEN_BUDGET,
    FramePlan,
    PlanSpec,
    parse_plan,
    plan_frames,
)


@dataclass(slots=True)
class FramesResult:
    """One video's frames for one plan: ``jpegs[j]`` shows stored frame ``plan.indices[j]``."""

    video_id: str
    plan: FramePlan
    jpegs: list[bytes]
    sizes: list[tuple[int, int]]
    jpeg_quality: int = JPEG_QUALITY
    stats: DecodeStats = field(default_factory=DecodeStats)

    @property
    def indices(self) -> list[int]:
        return list(self.plan.indices)

    @property
    def timestamps(self) -> list[float]:
        return list(self.plan.timestamps)

    @property
    def capped_ctx(self) -> bool | None:
        return self.plan.extra.get("capped_ctx")

    @property
    def capped(self) -> bool | None:
        """Grids over 32 frames (``v_128_s224``): the video had fewer, all were sent."""
        return self.plan.extra.get("capped")

    @property
    def n_grid(self) -> int | None:
        return self.plan.extra.get("n_grid")

    @property
    def n_max(self) -> int | None:
        return self.plan.extra.get("n_max")

    @property
    def n_frames_used(self) -> int | None:
        return self.plan.extra.get("n_frames_used")

    def frames_json(self) -> dict[str, Any]:
        """The ``frames.json`` object of this result (schema in :mod:`benchcheck.video.cache`)."""
        return {"video_id": self.video_id, **self.plan.record(), "jpeg_quality": self.jpeg_quality,
                "sizes": [list(s) for s in self.sizes],
                "files": [f"frame_{k}.jpg" for k in self.plan.positions]}


def frame_to_jpeg(frame: Any, width: int, height: int, quality: int = JPEG_QUALITY) -> bytes:
    """A decoded frame as JPEG bytes at ``width x height`` (display orientation)."""
    import numpy as np
    from av.video.reformatter import Interpolation
    from PIL import Image

    turns = display_turns(frame)
    w, h = (height, width) if turns % 2 else (width, height)
    flags = Interpolation.AREA | Interpolation.ACCURATE_RND | Interpolation.BITEXACT
    rgb = frame.reformat(width=w, height=h, format="rgb24", interpolation=flags, threads=1).to_ndarray()
    if turns:
        rgb = np.ascontiguousarray(np.rot90(rgb, k=turns))
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _jpeg_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return int(im.width), int(im.height)


def plan_for(store: Path, video_id: str, plan: str | PlanSpec, token_budget: int = TOKEN_BUDGET,
             max_images: int = MAX_IMAGES) -> FramePlan:
    """The plan applied to one normalized video (reads its ``meta.json``)."""
    spec = parse_plan(plan) if isinstance(plan, str) else plan
    meta = read_meta(store, video_id)
    return plan_frames(spec, meta.timestamps, meta.width, meta.height, token_budget, max_images)


def extract_plan(store: Path, video_id: str, plan: FramePlan, jpeg_quality: int = JPEG_QUALITY,
                 strategy: Strategy = "auto") -> FramesResult:
    """Decode and encode the frames of an already computed plan.

    Raises ``ValueError`` naming the video file when it cannot be decoded.
    """
    import av

    stats = DecodeStats()
    path = video_path(store, video_id)
    try:
        by_index = decode_frames(path, plan.unique_indices,
                                 lambda f: frame_to_jpeg(f, plan.width, plan.height, jpeg_quality),
                                 strategy=strategy, stats=stats)
    except (OSError, ValueError, av.error.FFmpegError) as e:
        raise ValueError(f"{path}: {e}") from e
    jpegs = [by_index[i] for i in plan.indices]
    sizes_by_index = {i: _jpeg_size(b) for i, b in by_index.items()}
    return FramesResult(video_id, plan, jpegs, [sizes_by_index[i] for i in plan.indices], jpeg_quality, stats)


def extract_jpegs(store: Path, video_id: str, plan: str, *, jpeg_quality: int = JPEG_QUALITY,
                  token_budget: int = TOKEN_BUDGET, max_images: int = MAX_IMAGES,
                  strategy: Strategy = "auto") -> FramesResult:
    """The frames of ``plan`` for one normalized video, in memory (same bytes as the cache).

    Raises ``ValueError`` naming the file when the video or its ``meta.json`` is unusable.
    """
    fplan = plan_for(Path(store), video_id, plan, token_budget, max_images)
    return extract_plan(Path(store), video_id, fplan, jpeg_quality, strategy)


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    """What :func:`extract_to_cache` did for one video: ``done``, ``cached`` (already there)."""

    video_id: str
    status: str
    n_frames: int = 0


def extract_to_cache(store: Path, video_id: str, plan: str, out: Path, *,
                     jpeg_quality: int = JPEG_QUALITY, token_budget: int = TOKEN_BUDGET,
                     max_images: int = MAX_IMAGES) -> CacheOutcome:
    """Write one video's frames for ``plan`` to the cache ``out`` unless already there."""
    fplan = plan_for(Path(store), video_id, plan, token_budget, max_images)
    wanted = {**fplan.record(), "jpeg_quality": jpeg_quality}
    if cache_satisfies(out, video_id, wanted):
        return CacheOutcome(video_id, "cached", len(fplan.indices))
    result = extract_plan(Path(store), video_id, fplan, jpeg_quality)
    write_frames(out, video_id, result.frames_json(), result.jpegs)
    return CacheOutcome(video_id, "done", len(result.jpegs))
