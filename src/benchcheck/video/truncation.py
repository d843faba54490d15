"""Whether a clip's frames end well before the duration its file declares: the one rule of
``videos normalize`` (which fails such a source) and of the samplers of raw clips, ``qa``'s
endpoint frames and ``serve``'s video parts (which refuse such a clip), so a cut clip is never
stored or sampled as the shorter video its frames make (docs/video.md, "Truncated").

Reads only what the demux pass already holds (the stream's header and the packets' times): it
decodes nothing. Files that declare no duration (MPEG-TS, MPEG-PS) are checked by their bytes,
in :mod:`benchcheck.video.cut_end`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from benchcheck.video.decode import PacketIndex

# A clip whose frames stop this early before the duration its file declares is truncated: more
# than 5 % of its frames are missing (docs/video.md).
MIN_COVERAGE = 0.95
# Below this declared duration nothing is checked: a frame's time is then too much of it.
MIN_DECLARED_S = 1.0


def frames_short(times: Sequence[float], frame_duration: float, declared: float | None,
                 last_shown: float = 0.0) -> str | None:
    """Why frames at ``times`` (seconds from the first) fall short of ``declared``, or None (pure).

    ``last_shown``: how long the file says its last frame is shown (a frame held at the end is
    not missing frames), when it says so."""
    if not times or not declared or declared <= MIN_DECLARED_S:
        return None
    end = times[-1] + max(frame_duration, last_shown)
    if end < MIN_COVERAGE * declared:
        return f"truncated: frames end at {end:.1f} s of the {declared:.1f} s declared"
    return None


def truncation(container: Any, stream: Any, packets: Sequence[Any], index: PacketIndex) -> str | None:
    """Why the opened clip is truncated (one line: ``truncated: frames end at ...``), or None.

    A clip whose frames carry no timestamps is never truncated by this rule: its declared
    duration or rate is what times them. ``packets``, ``index``: its video stream's, as
    :func:`benchcheck.video.decode.read_packets` gives them."""
    if not index.pts or index.untimed:
        return None
    times = index.timestamps
    spacing = sorted(b - a for a, b in itertools.pairwise(times))
    frame_duration = spacing[len(spacing) // 2] if spacing else 0.0
    start = float(index.pts[0] * index.time_base)
    last = packets[index.packet_of[-1]]
    last_shown = float(last.duration * stream.time_base) if last.duration and stream.time_base else 0.0
    return frames_short(times, frame_duration, declared_duration(container, stream, start), last_shown)


def stream_duration(stream: Any) -> float | None:
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    return None


_TAG_TIME = re.compile(r"^(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)$")


def _tag_seconds(text: Any) -> float | None:
    """``"00:00:05.000000000"`` (a Matroska ``DURATION`` tag) in seconds."""
    m = _TAG_TIME.match(str(text).strip())
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) if m else None


def declared_duration(container: Any, stream: Any, start: float = 0.0) -> float | None:
    """The duration a file declares for its video: the stream's own (mp4), else the track's
    ``DURATION`` tag (Matroska keeps none in the stream), else the container's when the video is
    its only stream (the container's covers every stream: audio may run past the video). An AVI
    declares its video's frame count in the stream header: FFmpeg shrinks the stream's duration
    by the share of the file that is there when the file is shorter than its RIFF header says, so
    a cut AVI declared just the duration its frames cover; the frame count is left as written.

    ``start``: the time of the stream's first frame on the file's timeline (seconds). Matroska's
    durations (the tag, the segment's, and the stream's FFmpeg fills in from it) are where the
    track ends on that timeline, not how long it lasts: a clip whose first frame is at ``start``
    (a stream recording cut with its timestamps kept) declared its start more than its frames
    cover and was failed as truncated, so the time before ``start`` is taken off them."""
    if container.format.name == "avi" and stream.frames and stream.time_base:
        return float(stream.frames * stream.time_base)
    declared = stream_duration(stream)
    if declared is None:
        tags = {str(k).upper(): v for k, v in (stream.metadata or {}).items()}
        for key in ("DURATION", *sorted(k for k in tags if k.startswith("DURATION-"))):
            if key in tags and (seconds := _tag_seconds(tags[key])):
                declared = seconds
                break
    if declared is None and len(container.streams) == 1 and container.duration:
        declared = float(container.duration) / 1_000_000  # AV_TIME_BASE
    if declared is not None and container.format.name.startswith("matroska"):
        declared -= max(0.0, start)
    return declared
