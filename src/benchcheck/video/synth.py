"""Synthetic test videos whose frames paint their own index, and the reader of that code.

Every frame carries a 4 x 4 grid of black/white cells in a centred square whose side is
80 % of the frame's short side. The four corner cells mark the orientation (top-left white,
the other three black) and the twelve other cells hold the frame index in binary (most
significant bit first, row-major order skipping the corners), so indices 0..4095 survive
H.264, JPEG q=85, resizing and rotation: :func:`read_frame_code` finds the orientation, then
the index. Tests use it to read back which stored frame a plan picked; the demo uses
:func:`make_test_video` to make small videos.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

CODE_CELLS = 4
MAX_CODE = (1 << 12) - 1
_CORNERS = ((0, 0), (0, CODE_CELLS - 1), (CODE_CELLS - 1, 0), (CODE_CELLS - 1, CODE_CELLS - 1))
_DATA_CELLS = tuple((r, c) for r in range(CODE_CELLS) for c in range(CODE_CELLS) if (r, c) not in _CORNERS)

U8Array = npt.NDArray[np.uint8]


def _code_square(width: int, height: int) -> tuple[int, int, float]:
    """(left, top, cell side) of the centred code square."""
    side = 0.8 * min(width, height)
    return round((width - side) / 2), round((height - side) / 2), side / CODE_CELLS


def code_cells(index: int) -> npt.NDArray[np.bool_]:
    """The 4 x 4 white/black pattern of one index (True = white), upright."""
    if not 0 <= index <= MAX_CODE:
        raise ValueError(f"frame index {index} outside 0..{MAX_CODE}")
    cells = np.zeros((CODE_CELLS, CODE_CELLS), dtype=bool)
    cells[0, 0] = True
    for bit, (r, c) in enumerate(_DATA_CELLS):
        cells[r, c] = bool((index >> (len(_DATA_CELLS) - 1 - bit)) & 1)
    return cells


def paint_frame(index: int, width: int, height: int, background: U8Array | None = None) -> U8Array:
    """An RGB frame (height x width x 3) showing ``index``; grey or ``background`` elsewhere."""
    img = np.full((height, width, 3), 128, dtype=np.uint8) if background is None else background.copy()
    left, top, cell = _code_square(width, height)
    for (r, c), white in np.ndenumerate(code_cells(index)):
        y0, y1 = top + round(r * cell), top + round((r + 1) * cell)
        x0, x1 = left + round(c * cell), left + round((c + 1) * cell)
        img[y0:y1, x0:x1] = 255 if white else 0
    return img


def _as_gray(image: Any) -> npt.NDArray[np.float32]:
    from PIL import Image

    if isinstance(image, bytes | bytearray):
        image = Image.open(BytesIO(image))
    if isinstance(image, Image.Image):
        image = np.asarray(image.convert("L"))
    arr = np.asarray(image, dtype=np.float32)
    return arr.mean(axis=2) if arr.ndim == 3 else arr


def read_frame_code(image: Any) -> tuple[int, int]:
    """(index, quarter_turns) painted in ``image`` (JPEG bytes, a PIL image or an array).

    ``quarter_turns`` is how many times the painted pattern was turned counter-clockwise by
    90 degrees (0 for an upright frame). Raises ``ValueError`` when no code is readable.
    """
    gray = _as_gray(image)
    h, w = gray.shape
    left, top, cell = _code_square(w, h)
    inner = cell / 4
    cells = np.zeros((CODE_CELLS, CODE_CELLS), dtype=bool)
    for r in range(CODE_CELLS):
        for c in range(CODE_CELLS):
            y0, y1 = int(top + r * cell + inner), int(np.ceil(top + (r + 1) * cell - inner))
            x0, x1 = int(left + c * cell + inner), int(np.ceil(left + (c + 1) * cell - inner))
            cells[r, c] = float(gray[y0:max(y1, y0 + 1), x0:max(x1, x0 + 1)].mean()) > 127.5
    for turns in range(4):
        upright = np.rot90(cells, k=-turns)
        if upright[0, 0] and not any(upright[r, c] for r, c in _CORNERS[1:]):
            bits = [upright[r, c] for r, c in _DATA_CELLS]
            return sum(int(b) << (len(bits) - 1 - i) for i, b in enumerate(bits)), turns
    raise ValueError("no frame code found in the image")


def read_frame_index(image: Any) -> int:
    """The frame index painted in ``image`` (JPEG bytes, a PIL image or an array)."""
    return read_frame_code(image)[0]


def _texture(width: int, height: int, seed: int) -> U8Array:
    """A smooth random colour texture twice the frame size, for realistic motion and bitrate."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, size=(max(2, height // 32), max(2, width // 32), 3), dtype=np.uint8)
    big = Image.fromarray(small).resize((2 * width, 2 * height), Image.Resampling.BICUBIC)
    detail = rng.integers(-8, 9, size=(2 * height, 2 * width, 1), dtype=np.int16)
    out: U8Array = np.clip(np.asarray(big, dtype=np.int16) + detail, 0, 255).astype(np.uint8)
    return out


def make_test_video(
    path: Path,
    n_frames: int,
    fps: float = 2.0,
    width: int = 320,
    height: int = 180,
    gop: int | None = None,
    *,
    timestamps: Sequence[float] | None = None,
    rotation: float = 0,
    textured: bool = False,
    crf: int = 23,
    preset: str = "veryfast",
    bframes: int | None = None,
    faststart: bool = False,
    seed: int = 0,
    container: str = "mp4",
) -> Path:
    """Write an H.264 mp4 of ``n_frames`` frames, frame i painting index i (see module doc).

    ``timestamps`` (seconds, increasing) makes a variable-frame-rate video instead of ``fps``;
    ``gop`` fixes the keyframe interval (scene-cut keyframes off); ``rotation`` writes a
    display matrix (degrees counter-clockwise, as PyAV reads it back); ``textured`` paints a
    panning texture around the code (realistic bitrate and decode cost, for benchmarks);
    ``faststart`` puts the index (moov) before the media data, as streaming sites do;
    ``container``: another muxer (``avi`` stamps packets in decode order, ``h264`` writes a raw
    stream without timestamps).
    """
    import av

    if n_frames < 1 or width < 16 or height < 16 or width % 2 or height % 2:
        raise ValueError("need n_frames >= 1 and even width, height >= 16")
    if timestamps is not None and len(timestamps) != n_frames:
        raise ValueError("timestamps must have one entry per frame")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    time_base = Fraction(1, 1000) if timestamps is not None else Fraction(1, 1) / Fraction(fps).limit_denominator(1000)
    options = {"preset": preset, "crf": str(crf)}
    if gop is not None:
        options.update({"keyint_min": str(gop), "sc_threshold": "0"})
    if bframes is not None:
        options["bf"] = str(bframes)
    texture = _texture(width, height, seed) if textured else None
    container_options = {"movflags": "+faststart"} if faststart else {}
    with av.open(str(path), "w", format=container, options=container_options) as out:
        stream = out.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = time_base
        stream.codec_context.time_base = time_base
        if gop is not None:
            stream.codec_context.gop_size = gop
        stream.codec_context.options = options
        if rotation:
            stream.set_display_rotation(rotation)
        for i in range(n_frames):
            background = None
            if texture is not None:
                # Pan diagonally across the double-size texture, so P-frames carry real motion.
                x = int(i * 3) % width
                y = int(i * 2) % height
                background = texture[y:y + height, x:x + width]
            frame = av.VideoFrame.from_ndarray(paint_frame(i, width, height, background), format="rgb24")
            frame.pts = round(timestamps[i] * 1000) if timestamps is not None else i
            frame.time_base = time_base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path
