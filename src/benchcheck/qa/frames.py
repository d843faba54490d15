"""Time-uniform frames of one clip as JPEG bytes, for the endpoint VLM.

Built on :mod:`benchcheck.video`: the grid is ``uniform_grid`` over the clip's presentation
timestamps (the same rule as the screening grids), ``decode_indexed`` decodes only what the
grid needs (seeking on long-GOP clips), and ``frame_to_jpeg`` converts and resizes in one
swscale call, then encodes JPEG q=85.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchcheck.video.decode import display_turns


class TruncatedClip(ValueError):
    """The clip's frames end well before the duration its file declares; the message names it."""


def display_size(frame: Any, max_side: int) -> tuple[int, int]:
    """The frame's display ``(width, height)`` scaled so the long side is at most ``max_side``
    (0 keeps it); rotation metadata swaps the sides."""
    turns = display_turns(frame)
    w, h = (frame.height, frame.width) if turns % 2 else (frame.width, frame.height)
    if max_side and max(w, h) > max_side:
        scale = max_side / max(w, h)
        w, h = max(1, round(w * scale)), max(1, round(h * scale))
    return int(w), int(h)


def sample_jpegs(path: Path, n: int, max_side: int = 0) -> list[bytes]:
    """``n`` time-uniform frames (fewer when the clip has fewer), in time order, as JPEG.

    Raises ``ValueError`` naming the file when it cannot be decoded or is truncated.
    """
    import av

    from benchcheck.video.decode import by_output_order, decode_indexed, open_video, read_packets
    from benchcheck.video.extract import frame_to_jpeg
    from benchcheck.video.plans import dedup, uniform_grid
    from benchcheck.video.truncation import truncation

    try:
        container, stream = open_video(path)
        try:
            packets, index = read_packets(container, stream)
            if not index.pts:
                raise ValueError("no video frames")
            # normalize's rule: a cut clip gave a grid over the part that is there, frames of
            # other times than the question's clip, without a word
            if why := truncation(container, stream, packets, index):
                raise TruncatedClip(f"{path.name}: {why}")
            # A clip without timestamps has its frames evenly spaced (normalize times it alike);
            # taken by pts, every frame but one was missing and the clip failed.
            times = [float(i) for i in range(len(index.pts))] if index.untimed else index.timestamps
            grid = dedup(uniform_grid(times, n))
            # An AVI of H.264 with B-frames stamps its packets in decode order: taken by pts, a
            # grid frame was a neighbour of the one its time asks for (normalize's rule, so the
            # store and the sampler show a clip's frames alike).
            by_order = by_output_order(container, stream, packets, index)
            frames = decode_indexed(stream.codec_context, packets, index, grid,
                                    lambda f: frame_to_jpeg(f, *display_size(f, max_side)),
                                    output_order=by_order)
        finally:
            container.close()
    except TruncatedClip:
        raise
    except (OSError, ValueError, av.error.FFmpegError) as e:
        raise ValueError(f"cannot decode {path.name}: {e}") from e
    return [frames[i] for i in grid]
