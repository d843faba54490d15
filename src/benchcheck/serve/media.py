"""A served request's video part, read and decoded into the frames the engine is handed.

vLLM takes a ``video_url`` part as a ``data:video/...;base64`` URL or, only under
``--allowed-local-media-path DIR``, a ``file://`` URL of a file inside DIR. Its video loader keeps
``num_frames`` frames (``--media-io-kwargs '{"video": {"num_frames": N}}'``, 32 by default): the
frames ``numpy.linspace(0, frames - 1, N)`` truncated to integers, or every frame of a clip that
has no more than N. The same frames are decoded here with :mod:`benchcheck.video.decode` and
JPEG-encoded at their display size; the engines take frames, so they become the request's
images, in order. Decoding is blocking: :func:`load_video` runs on a thread.
"""

from __future__ import annotations

import io
import math
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.serve.chat import RequestError, VideoPart

DEFAULT_NUM_FRAMES = 32  # vLLM's VideoMediaIO default
# The packets a clip may have (about two and a half hours at 30 fps). A held packet costs
# hundreds of bytes whatever its size in the file, so this bounds the memory and demux time of
# a clip made of millions of tiny frames (docs/serve.md, "Videos").
MAX_VIDEO_PACKETS = 1 << 18
# Clips decoded at once: each decode holds a core and its clip's packets; more wait their turn
# (and a queued one whose client has gone is never decoded).
VIDEO_DECODE_THREADS = min(8, os.cpu_count() or 1)
# Seconds one clip's frames may take to decode: within both caps a clip of large frames, whose
# wanted frames lie far apart, can still hold a decode thread for minutes (docs/serve.md, "Videos").
DEFAULT_DECODE_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class MediaOptions:
    """The server's video settings. ``allowed_local_media_path`` is stored resolved (realpath):
    a ``file://`` path is accepted when its own realpath lies below it."""

    num_frames: int = DEFAULT_NUM_FRAMES
    allowed_local_media_path: Path | None = None
    decode_timeout_s: float = DEFAULT_DECODE_TIMEOUT_S

    @classmethod
    def make(cls, num_frames: int = DEFAULT_NUM_FRAMES, allowed_local_media_path: str | Path | None = None,
             decode_timeout_s: float = DEFAULT_DECODE_TIMEOUT_S) -> MediaOptions:
        """Options with the allowed folder resolved; ``ValueError`` if it is not a folder."""
        root = None
        if allowed_local_media_path is not None:
            root = Path(os.path.realpath(allowed_local_media_path))
            if not root.is_dir():
                raise ValueError(f"--allowed-local-media-path {allowed_local_media_path} is not a folder")
        if num_frames < 1:
            raise ValueError(f"the number of video frames must be at least 1 (got {num_frames})")
        if not (math.isfinite(decode_timeout_s) and decode_timeout_s > 0):
            raise ValueError(f"the video decode timeout must be a positive number of seconds (got {decode_timeout_s})")
        return cls(num_frames, root, decode_timeout_s)


def sample_indices(total: int, n: int) -> list[int]:
    """The frames vLLM's video loader keeps of a clip of ``total`` frames (module doc)."""
    import numpy as np

    if total <= n:
        return list(range(total))
    return [int(k) for k in np.linspace(0, total - 1, n, dtype=int)]


def _open_below(root: Path, real: Path) -> int:
    """A descriptor of ``real`` (a realpath below ``root``), opened one step at a time from
    ``root`` without following a symlink at any step: a folder on the checked path swapped for a
    symlink out of ``root`` between the check and the open fails the open (ENOTDIR) instead of
    being followed. O_NONBLOCK: a FIFO placed there is refused by the caller instead of blocking
    the open; O_DIRECTORY on the steps before the last: a FIFO there fails at once too."""
    *folders, name = real.relative_to(root).parts
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for folder in folders:
            step = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = step
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def _read_local(part: VideoPart, opts: MediaOptions, max_bytes: int) -> bytes:
    """The bytes of a ``file://`` part's file, which must resolve inside the allowed folder and
    be no larger than ``max_bytes`` (what a request body may be)."""
    i, given = part.index, part.path or ""
    root = opts.allowed_local_media_path
    if root is None:
        raise RequestError(f"video part {i}: cannot load local files without `--allowed-local-media-path`")
    try:
        real = Path(os.path.realpath(given))
    except (OSError, ValueError) as e:  # a NUL byte, a symlink loop
        raise RequestError(f"video part {i}: the file path is not usable ({e})") from None
    if root not in real.parents:
        # The folder itself is not named: a client learns only that its path is outside it.
        raise RequestError(f"video part {i}: the file path {given!r:.200} must be inside "
                           "`--allowed-local-media-path`")
    try:
        fd = _open_below(root, real)
    except OSError as e:
        raise RequestError(f"video part {i}: cannot read {given!r:.200}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a folder opens too
            raise RequestError(f"video part {i}: cannot read {given!r:.200}: not a regular file")
        if st.st_size > max_bytes:
            raise RequestError(f"video part {i}: {given!r:.200} is over {max_bytes} bytes")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(max_bytes)
    except OSError as e:
        raise RequestError(f"video part {i}: cannot read {given!r:.200}: {e.strerror}") from None
    finally:
        os.close(fd)


def _to_jpeg(frame: Any) -> bytes:
    """A decoded frame as JPEG at display size, refused when over Pillow's pixel cap: the stream's
    declared size is checked before decoding, but a later frame may change it (a new H.264
    sequence header, an MJPEG frame of another size)."""
    from PIL import Image

    from benchcheck.qa.frames import display_size
    from benchcheck.video.extract import frame_to_jpeg

    if Image.MAX_IMAGE_PIXELS and frame.width * frame.height > Image.MAX_IMAGE_PIXELS:
        raise ValueError(f"frames of {frame.width}x{frame.height} are over {Image.MAX_IMAGE_PIXELS} pixels")
    return frame_to_jpeg(frame, *display_size(frame, 0))


def decode_frames(data: bytes, n: int, timeout_s: float = DEFAULT_DECODE_TIMEOUT_S) -> tuple[bytes, ...]:
    """The frames of the clip ``data`` that :func:`sample_indices` keeps, in order, as JPEG at
    display size. ``ValueError`` (one line) when the bytes are no decodable video,
    ``TimeoutError`` when its frames take more than ``timeout_s`` seconds to decode."""
    import av
    from PIL import Image

    from benchcheck.video.decode import by_output_order, decode_indexed, open_video, read_packets
    from benchcheck.video.truncation import truncation

    deadline = time.monotonic() + timeout_s
    try:
        container, stream = open_video(io.BytesIO(data))
        try:
            ctx = stream.codec_context
            # The cap Pillow puts on an image part: a small clip may declare a huge frame.
            if Image.MAX_IMAGE_PIXELS and (ctx.width or 0) * (ctx.height or 0) > Image.MAX_IMAGE_PIXELS:
                raise ValueError(f"frames of {ctx.width}x{ctx.height} are over {Image.MAX_IMAGE_PIXELS} pixels")
            packets, index = read_packets(container, stream, MAX_VIDEO_PACKETS, deadline)
            # normalize's and qa's rule: a cut clip's frames were sampled from the part there is
            if why := truncation(container, stream, packets, index):
                raise ValueError(why)
            wanted = sample_indices(len(index.pts), n)
            # frame k is the k-th shown, also where the packets' pts are in decode order (an AVI
            # of H.264 with B-frames: taken by pts, it was a neighbour of it) or all the same (a
            # clip without timestamps: taken by pts, all but one were missing)
            by_order = by_output_order(container, stream, packets, index, deadline)
            frames = decode_indexed(ctx, packets, index, wanted, _to_jpeg, deadline=deadline,
                                    output_order=by_order)
        finally:
            container.close()
    except TimeoutError:
        raise  # an OSError, but the clip's time, not its bytes
    except (av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError) as e:
        # Any failure to decode a client's bytes is the client's video: one line, never a 500.
        # FFmpeg's errors carry their text in strerror (str() adds an errno and a '<none>' file).
        text = getattr(e, "strerror", None) or str(e)
        raise ValueError(" ".join(text.split()) or type(e).__name__) from None
    return tuple(frames[k] for k in wanted)


def load_video(part: VideoPart, opts: MediaOptions, max_bytes: int) -> tuple[bytes, ...]:
    """A video part's frames for the engine (blocking); ``RequestError`` (400) when the part's
    file may not or cannot be read, its bytes are no video, or they take too long to decode."""
    data = part.data if part.data is not None else _read_local(part, opts, max_bytes)
    try:
        return decode_frames(data, opts.num_frames, opts.decode_timeout_s)
    except TimeoutError as e:
        raise RequestError(f"video part {part.index} ({len(data)} bytes): its frames took over "
                           f"{opts.decode_timeout_s:g} s to decode (--video-decode-timeout; {e})") from None
    except ValueError as e:
        raise RequestError(f"video part {part.index} ({len(data)} bytes): not a readable video "
                           f"({e!s:.300})") from None
