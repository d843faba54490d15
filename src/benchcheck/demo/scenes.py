"""Synthetic scenes of coloured shapes for the demo's known-answer benchmarks.

Every scene is a 20 s clip at 2 fps (40 frames, so the normalized store keeps every frame)
of 896x448 pixels (2:1, so the screening grid at 448 px long side is 448x224) on a dark grey
background, holding five elements at fixed places, each behind one kind of question:

- a large **static** block on the left, one colour for the whole clip;
- a **middle square** that shows colour ``first`` in the first half and ``second`` after it
  (which came first needs several frames in order);
- a **ball** moving along the bottom, left to right or right to left (which way needs several
  frames in order);
- a **flash** at the top right, shown in exactly one stored frame chosen so that the 32-frame
  grid holds it and the 8-frame grid and the middle frame do not (:func:`flash_choices`);
- a **tiny white dot** (2x2 px) in one corner, placed on the 8-px lattice offset by one pixel,
  so the area filter of every downscale splits it over several output pixels: full contrast at
  short side 448 (storage) and 336, a quarter at 224 (and in the 448x224 screening grid), less
  than a third at 168.

Colours come from :data:`PALETTE`; a scene's five colours are distinct, so the other three
serve as distractors that appear nowhere in the clip.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from benchcheck.engines.rules.reference_vision import COLOUR_RGB
from benchcheck.video.plans import GRID32, MID_POSITION, uniform_grid

# The colours the reference engine knows by name are the colours the scenes are painted with.
PALETTE = COLOUR_RGB
BACKGROUND = (24, 24, 24)
WIDTH, HEIGHT = 896, 448
FPS = 2
N_FRAMES = 40
CORNERS = ("top left", "top right", "bottom left", "bottom right")
Direction = Literal["left", "right"]

# Element boxes as (x0, y0, x1, y1) in storage pixels.
STATIC_BOX = (80, 80, 300, 368)
MIDDLE_BOX = (360, 140, 540, 300)
FLASH_BOX = (600, 40, 800, 180)
BALL_Y = (330, 386)
BALL_SIZE = 56
BALL_X_RANGE = (330, 800)
DOT_SIZE = 2
# On the 8-px lattice + 1 (see the module doc), clear of every other element.
DOT_AT = {"top left": (25, 25), "top right": (865, 25), "bottom left": (25, 417), "bottom right": (865, 417)}

U8Array = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class Scene:
    """What one clip shows (the construction; an engine never sees this)."""

    index: int
    static: str
    first: str
    second: str
    ball: str
    flash: str
    direction: Direction
    flash_frame: int
    dot_corner: str

    @property
    def colours(self) -> tuple[str, ...]:
        return (self.static, self.first, self.second, self.ball, self.flash)

    @property
    def absent(self) -> list[str]:
        """Palette colours that appear nowhere in the clip."""
        return [c for c in PALETTE if c not in self.colours]


def stored_timestamps() -> list[float]:
    return [j / FPS for j in range(N_FRAMES)]


def flash_choices() -> list[int]:
    """Stored frames in the 32-frame grid but not in the 8-frame grid nor the middle frame,
    nor next to an 8-grid frame (so any nearby grid still misses it)."""
    ts = stored_timestamps()
    g32, g8 = uniform_grid(ts, GRID32), set(uniform_grid(ts, 8))
    mid = g32[MID_POSITION]
    near8 = {i + d for i in g8 for d in (-1, 0, 1)}
    return sorted({i for i in g32 if i not in near8 and i != mid})


def make_scenes(n: int, seed: int = 0) -> list[Scene]:
    """``n`` scenes with seeded colours, directions, flash frames and dot corners."""
    rng = random.Random(f"demo-scenes|{seed}")
    flashes = flash_choices()
    out = []
    for i in range(n):
        static, first, second, ball, flash = rng.sample(list(PALETTE), 5)
        out.append(Scene(i, static, first, second, ball, flash, "right" if i % 2 == 0 else "left",
                         flashes[i % len(flashes)], CORNERS[(i // 2) % 4]))
    return out


def paint(scene: Scene, i: int) -> U8Array:
    """Frame ``i`` of ``scene`` as an RGB array."""
    a = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    a[:] = BACKGROUND

    def box(b: tuple[int, int, int, int], colour: str) -> None:
        x0, y0, x1, y1 = b
        a[y0:y1, x0:x1] = PALETTE[colour]

    box(STATIC_BOX, scene.static)
    box(MIDDLE_BOX, scene.first if i < N_FRAMES // 2 else scene.second)
    if i == scene.flash_frame:
        box(FLASH_BOX, scene.flash)
    lo, hi = BALL_X_RANGE
    travel = (hi - lo - BALL_SIZE) * i / (N_FRAMES - 1)
    x = round(lo + travel) if scene.direction == "right" else round(hi - BALL_SIZE - travel)
    box((x, BALL_Y[0], x + BALL_SIZE, BALL_Y[0] + BALL_SIZE), scene.ball)
    dx, dy = DOT_AT[scene.dot_corner]
    a[dy:dy + DOT_SIZE, dx:dx + DOT_SIZE] = 255
    return a


def write_scene_video(scene: Scene, path: Path) -> Path:
    """The scene as an H.264 mp4 (near-lossless, so the store's own encoding is the only loss
    that matters)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.mp4")
    with av.open(str(tmp), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=Fraction(FPS))
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.codec_context.options = {"preset": "veryfast", "crf": "16"}
        for i in range(N_FRAMES):
            frame = av.VideoFrame.from_ndarray(paint(scene, i), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    tmp.replace(path)  # a killed run never leaves a half-written clip under the final name
    return path
