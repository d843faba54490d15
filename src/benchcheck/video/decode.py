"""Decode only the frames a plan needs.

The file's packets are read once into memory (a demux pass costs little next to decoding).
Frame ``i`` is the i-th frame in presentation order (the rank of its pts). To show frame i the
decoder must start at the keyframe before it in decode order and decode every packet up to it,
so the work of a set of frames is a set of *runs* of packets, each starting at a keyframe.
:func:`schedule_runs` builds them per wanted frame, in decode order: keep decoding from where
the last run ended, or jump ("seek") to the frame's keyframe, whichever decodes fewer packets.
Because the packets are in memory, a jump costs only a decoder reset (:data:`SEEK_COST`), so
the decoder jumps whenever a keyframe lies between its position and the next wanted frame and
continues otherwise: on a long-GOP source with sparse frames that is seeking, on a short-GOP
store with dense frames one sequential pass, on anything between a mix, and never more work
than either (tests/video/test_video_decode.py checks it). Packets of frames nobody wants are
decoded with ``skip_frame=NONREF``, so the decoder drops those that no other frame
references. Only the wanted frames are converted to RGB, resized and encoded.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import itertools
import math
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar

T = TypeVar("T")

# A jump to a keyframe costs a decoder reset on top of the packets it decodes: far less than one
# packet (benchmarks/frames.py; see decision 032). Half a packet makes the decoder continue
# when the next keyframe is the very next packet (same work, no reset).
SEEK_COST = 0.5

Strategy = Literal["auto", "seek", "sequential"]

# Frames decoded at the start of a source to see whether its packets' pts are presentation times
# (docs/video.md, "Sources whose pts are in decode order").
ORDER_PROBE_FRAMES = 64


def quarter_turn(degrees: float) -> int:
    """``degrees`` to the nearest quarter turn, in degrees from zero up to a full turn (exclusive;
    a tie goes to the smaller turn)."""
    return int(90 * math.ceil(degrees / 90 - 0.5)) % 360


def display_turns(frame: Any) -> int:
    """How many quarter turns counter-clockwise make the decoded ``frame`` upright: its display
    rotation to the nearest quarter turn. Every reader of a frame's rotation goes through here,
    so the store, the frame cache and the ``qa`` sampler turn the same clip alike (PyAV reads an
    angle a hair off a quarter turn rounded down, which rounding down again left unturned)."""
    return quarter_turn(float(frame.rotation or 0)) // 90


@dataclass(frozen=True, slots=True)
class PacketIndex:
    """Where every frame of a video stream lives, in decode order.

    ``pts[i]`` is frame i's presentation timestamp (``time_base`` units) and ``packet_of[i]``
    the decode-order position of its packet; ``entry[i]`` the keyframe position from which
    decoding reaches frame i; ``keyframes`` are the keyframe positions.
    """

    pts: tuple[int, ...]
    packet_of: tuple[int, ...]
    entry: tuple[int, ...]
    keyframes: tuple[int, ...]
    time_base: Fraction

    @property
    def timestamps(self) -> list[float]:
        t0 = self.pts[0] if self.pts else 0
        return [float((p - t0) * self.time_base) for p in self.pts]

    @property
    def untimed(self) -> bool:
        """Every frame has the same pts (a stream written without timestamps, or one whose frames
        carry too few to time the others by: :func:`read_packets`): the pts say neither
        when a frame is shown nor in which order, so its frames are evenly spaced in the decoder's
        output order (``normalize`` times them by the stream's frame rate alike)."""
        return len(self.pts) > 1 and len(set(self.pts)) == 1

    @property
    def mean_gop(self) -> float:
        return len(self.pts) / max(1, len(self.keyframes))


def build_index(packet_pts: Sequence[int | None], packet_key: Sequence[bool], time_base: Fraction,
                packet_discard: Sequence[bool] | None = None) -> PacketIndex:
    """The index of a stream from its packets' pts and keyframe flags (decode order).

    A packet flagged discard (outside an mp4's edit list: the lead-in a cut without re-encoding,
    ``ffmpeg -ss T -c copy``, keeps before its first shown frame) is decoded as a reference but
    is no frame: the decoder never shows it, and time 0 is the first frame it does show.

    A packet without a pts is no frame (:func:`read_packets` has timed every one the decoder
    shows), unless no packet has one."""
    discard = packet_discard or [False] * len(packet_pts)
    if packet_pts and all(p is None for p, d in zip(packet_pts, discard, strict=True) if not d):
        # A raw elementary stream (H.264 or HEVC written as is, whatever its file's extension)
        # carries no timestamps at all: its frames are untimed, as when every pts is the same.
        # Dropped for their missing pts, they left none and the file read as having no frames.
        packet_pts = [0] * len(packet_pts)
    order = [p for p in range(len(packet_pts)) if packet_pts[p] is not None and not discard[p]]
    order.sort(key=lambda p: (packet_pts[p], p))
    keyframes = [p for p in range(len(packet_pts)) if packet_key[p]]
    if not order or not keyframes:
        raise ValueError("the video stream has no decodable frames")
    pts = tuple(int(packet_pts[p]) for p in order)  # type: ignore[arg-type]
    entry = []
    for p in order:
        j = bisect.bisect_right(keyframes, p) - 1
        if j < 0:
            j = 0
        # A leading frame of an open GOP (shown before its keyframe) needs the previous GOP. A
        # keyframe without a pts shows no frame of its own (a field of one): none leads it.
        key_pts = packet_pts[keyframes[j]]
        if j > 0 and key_pts is not None and packet_pts[p] < key_pts:  # type: ignore[operator]
            j -= 1
        entry.append(keyframes[j])
    return PacketIndex(pts, tuple(order), tuple(entry), tuple(keyframes), time_base)


@dataclass(frozen=True, slots=True)
class Run:
    """Decode packets ``start..end`` (inclusive, decode order) after a decoder reset."""

    start: int
    end: int


def schedule_runs(index: PacketIndex, wanted: Iterable[int], strategy: Strategy = "auto",
                  seek_cost: float = SEEK_COST) -> list[Run]:
    """The packet runs that decode the ``wanted`` frames (see the module doc).

    ``seek`` always jumps to each frame's keyframe unless it is already decoded on the way;
    ``sequential`` decodes one run from the first needed keyframe to the last wanted packet.
    """
    targets = sorted({(index.packet_of[i], index.entry[i]) for i in wanted})
    runs: list[Run] = []
    for p, k in targets:
        if runs and runs[-1].start <= k and p <= runs[-1].end:
            continue
        if runs and k >= runs[-1].start:
            last = runs[-1]
            keep = p - last.end
            jump = seek_cost + (p - k + 1)
            if strategy == "sequential" or (strategy == "auto" and keep <= jump) or k <= last.end:
                runs[-1] = Run(last.start, p)
                continue
        runs.append(Run(k, p))
    return runs


@dataclass(slots=True)
class DecodeStats:
    """What one extraction cost."""

    packets: int = 0
    decoded: int = 0
    runs: int = 0
    converted: int = 0
    strategy: str = ""


def read_packets(container: Any, stream: Any, max_packets: int | None = None,
                 deadline: float | None = None) -> tuple[list[Any], PacketIndex]:
    """Demux every packet of ``stream`` into memory; returns them with their index.

    ``max_packets``: ``ValueError`` once the stream has more, read no further. Each packet held
    costs far more memory than a tiny packet takes in the file, so a small clip of millions of
    tiny frames would otherwise hold gigabytes (and take minutes) before any check could run.

    A stream whose packets carry some pts but not all (an MPEG program or transport stream, whose
    packet of the file may start several frames and stamps the first only) is decoded once to
    time the frames without one (:func:`fill_missing_pts`); ``deadline``: as
    :func:`pts_in_decode_order`."""
    packets = []
    for count, p in enumerate(container.demux(stream), 1):
        if max_packets is not None and count > max_packets:
            raise ValueError(f"the video stream has over {max_packets} packets")
        if p.size > 0:
            packets.append(p)
    discard = [bool(p.is_discard) for p in packets]
    stamps = [p.pts for p, d in zip(packets, discard, strict=True) if not d]
    pts = [p.pts for p in packets]
    if None in stamps and any(s is not None for s in stamps):
        pts = fill_missing_pts(stream.codec_context, packets, discard, deadline)
    index = build_index(pts, [bool(p.is_keyframe) for p in packets], Fraction(stream.time_base), discard)
    return packets, index


def _rising(stamped: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of ``(position, pts)`` whose pts rise by at least a tick a position (pure)."""
    # pb - pa >= b - a is pts - position never falling: a longest non-decreasing run of that
    tails: list[int] = []  # the smallest last value of a chain of each length so far
    ends: list[int] = []  # where that chain ends
    before = [-1] * len(stamped)
    for j, (i, p) in enumerate(stamped):
        n = bisect.bisect_right(tails, p - i)
        before[j] = ends[n - 1] if n else -1
        if n == len(tails):
            tails.append(p - i)
            ends.append(j)
        else:
            tails[n], ends[n] = p - i, j
    chain = []
    j = ends[-1] if ends else -1
    while j >= 0:
        chain.append(stamped[j])
        j = before[j]
    return chain[::-1]


def between_stamps(shown: Sequence[int | None]) -> list[int] | None:
    """Pts for frames in the order they are shown, given theirs where they have one (None where
    not; pure): each frame without one evenly between its stamped neighbours, those before the
    first or after the last stamped frame spaced as the stamped frames next to them.

    FFmpeg's program-stream demuxer at times gives two frames the stamp of one, the earlier or
    the later: a stamp two frames carry is taken for none on both, and so is one off the longest
    chain of stamps that rise by at least a tick a frame (a stream that one wrong stamp made
    untimed lost its variable rate). None when that chain holds fewer than two frames or not
    most of the stamps."""
    count = collections.Counter(p for p in shown if p is not None)
    stamps = [(i, p) for i, p in enumerate(shown) if p is not None and count[p] == 1]
    stamped = _rising(stamps)
    if len(stamped) < 2 or 2 * len(stamped) <= len(stamps):
        return None
    out = [0] * len(shown)
    for (a, pa), (b, pb) in itertools.pairwise(stamped):
        for i in range(a, b):
            out[i] = pa + (pb - pa) * (i - a) // (b - a)
    (first, p_first), (second, p_second) = stamped[:2]
    (before, p_before), (last, p_last) = stamped[-2:]
    for i in range(first):
        out[i] = p_first - (p_second - p_first) // (second - first) * (first - i)
    for i in range(last, len(shown)):
        out[i] = p_last + (p_last - p_before) // (last - before) * (i - last)
    return out


OnError = Literal["skip", "stop"]


def decode_through(codec: Any, packets: Sequence[Any], deadline: float | None, what: str,
                   on_error: OnError) -> Generator[Any, None, None]:
    """Every frame ``codec`` gives out for ``packets`` in order, then the frames its flush gives,
    from a decoder flushed before and after (close the generator to stop early: the flush after
    runs then too).

    ``deadline`` (``time.monotonic()``): ``TimeoutError`` ("``what`` ran past the decode's time
    limit") before the next packet once past it. ``on_error``: what a packet the decoder refuses
    does, ``"skip"`` (go on with the next) or ``"stop"`` (end the frames there)."""
    import av

    codec.flush_buffers()
    try:
        for p in [*packets, None]:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{what} ran past the decode's time limit")
            try:
                frames = codec.decode(p)
            except av.error.FFmpegError:
                if on_error == "skip":
                    continue
                return
            yield from frames
    finally:
        codec.flush_buffers()


def fill_missing_pts(codec: Any, packets: list[Any], discard: Sequence[bool],
                     deadline: float | None = None) -> list[int | None]:
    """The pts of ``packets`` with the frames shown from those without one timed between their
    stamped neighbours in the decoder's output order (:func:`between_stamps`), which is
    presentation order: a packet's place in the file is its decode order, which B-frames
    reorder. Each packet that shows a frame gets its frame's pts, so the frame comes out of the
    decoder with it; one without a pts that shows no frame stays without, and is no frame. When
    the stamps cannot time the others, every pts is None: the stream is untimed, as one without
    timestamps.

    Untimed whole for one unstamped frame, a stream was timed by its codec's rate (which for a
    variable rate is its clock's tick: a clip of seconds was stored as one frame) and its duration
    went unchecked; dropped, the frames without a pts were missing from the store."""
    stamps = [p.pts for p in packets]
    for k, p in enumerate(packets):
        p.pts = k  # tells the packet of each frame the decoder shows
    try:
        # a damaged packet shows no frame: the decode that converts says so
        with contextlib.closing(decode_through(codec, packets, deadline, "timing the frames without a pts",
                                               on_error="skip")) as frames:
            order = [f.pts for f in frames if f.pts in range(len(packets)) and not discard[f.pts]]
    finally:
        for p, pts in zip(packets, stamps, strict=True):
            p.pts = pts
    timed = between_stamps([stamps[k] for k in order])
    if timed is None:
        return [None] * len(packets)
    for k, pts in zip(order, timed, strict=True):
        packets[k].pts = pts
    return [p.pts for p in packets]


def open_video(path: Path | BinaryIO, threads: int = 1, frame_threads: bool = True) -> tuple[Any, Any]:
    """Open a video file (or a file object: a clip in memory) for decoding; ``threads=1`` keeps
    one process on one core.

    ``frame_threads=False`` decodes one frame at a time whatever ``threads`` (slice threads only;
    dav1d with a frame delay of 1). On a damaged source, frame threads change which decode errors
    surface and which frames come out (a decoder several frames ahead drops or conceals them), so
    a source read with them could be stored or failed depending on the thread count; on an intact
    stream both give the same frames.
    """
    import av

    container = av.open(str(path) if isinstance(path, Path) else path)
    if not container.streams.video:
        container.close()
        raise ValueError("no video stream")
    # The stream a player shows (FFmpeg's best video stream), not the file's first: a first track
    # that is a still or a thumbnail would otherwise be stored as the video.
    stream = container.streams.best("video") or container.streams.video[0]
    ctx = stream.codec_context
    ctx.thread_count = threads
    ctx.thread_type = "SLICE" if threads == 1 or not frame_threads else "AUTO"
    if not frame_threads and ctx.name == "libdav1d":
        ctx.options = {"max_frame_delay": "1"}
    return container, stream


def pts_in_decode_order(codec: Any, packets: list[Any], deadline: float | None = None) -> bool:
    """True when the decoder gives the first frames out with pts that go back: the container
    stamped its packets in decode order (AVI has no presentation times; its demuxer rebuilds them
    for some codecs, not for H.264 with B-frames), so a frame's pts is not its presentation time.
    The decoder's output order still is. Packets whose pts already go back (B-frames in mp4, mkv)
    carry presentation times: nothing is decoded for them. ``deadline`` (``time.monotonic()``):
    ``TimeoutError`` past it, as ``decode_indexed`` (a stream that gives no frame is read whole)."""
    stamps = [p.pts for p in packets if p.pts is not None]
    if any(b < a for a, b in itertools.pairwise(stamps)):
        return False
    last = None
    # a damaged start stops the check (no reordering seen): the pass that converts says so
    with contextlib.closing(decode_through(codec, packets, deadline, "the decode-order check",
                                           on_error="stop")) as frames:
        for frame in itertools.islice(frames, ORDER_PROBE_FRAMES):
            if frame.pts is not None:
                if last is not None and frame.pts < last:
                    return True
                last = frame.pts
    return False


def by_output_order(container: Any, stream: Any, packets: list[Any], index: PacketIndex,
                    deadline: float | None = None) -> bool:
    """Whether a sampler takes frame k as the decoder's k-th frame out rather than by pts: an untimed
    stream, or an AVI whose packets' pts are in decode order (``pts_in_decode_order``). Only AVI
    stamps packets so (mp4, Matroska, MPEG-PS/TS and FLV carry presentation times): elsewhere the
    probe would decode its frames for nothing on every clip a request or an item sends. Normalize
    probes every container (it decodes every frame anyway): a non-AVI file stamped in decode order
    would be reordered in the store but sampled by pts here."""
    if index.untimed:
        return True
    return container.format.name == "avi" and pts_in_decode_order(stream.codec_context, packets, deadline)


def decode_frames(path: Path, wanted: Sequence[int], convert: Callable[[Any], T],
                  strategy: Strategy = "auto", threads: int = 1,
                  stats: DecodeStats | None = None) -> dict[int, T]:
    """``{frame index: convert(frame)}`` for the wanted frames of the video stream
    :func:`open_video` picks.

    Frame indices are presentation-order ranks (0 = first frame shown). Raises ``ValueError``
    when an index is out of range or a wanted frame does not come out of the decoder.
    """
    container, stream = open_video(path, threads)
    try:
        packets, index = read_packets(container, stream)
        return decode_indexed(stream.codec_context, packets, index, wanted, convert, strategy, stats)
    finally:
        container.close()


def decode_indexed(codec: Any, packets: Sequence[Any], index: PacketIndex, wanted: Sequence[int],
                   convert: Callable[[Any], T], strategy: Strategy = "auto",
                   stats: DecodeStats | None = None, deadline: float | None = None,
                   output_order: bool = False) -> dict[int, T]:
    """:func:`decode_frames` on packets already in memory. ``deadline``: a ``time.monotonic()``
    past which ``TimeoutError`` is raised before the next packet is decoded.

    ``output_order``: the packets' pts are in decode order (:func:`pts_in_decode_order`), so a
    frame's pts is not its presentation rank; every packet is decoded from the first and the
    decoder's k-th frame out is frame k (its output order is presentation order)."""
    n = len(index.pts)
    bad = [i for i in wanted if not 0 <= i < n]
    if bad:
        raise ValueError(f"frame index {bad[0]} outside 0..{n - 1}")
    rank = {pts: i for i, pts in enumerate(index.pts)}
    want = set(wanted)
    if output_order:
        # Frames are counted as they come out: none may be skipped, and decoding starts at the first.
        wanted_packets = set(range(len(packets)))
        runs = [Run(0, len(packets) - 1)] if want else []
    else:
        wanted_packets = {index.packet_of[i] for i in want}
        runs = schedule_runs(index, want, strategy)
    st = stats if stats is not None else DecodeStats()
    st.strategy, st.runs = "output-order" if output_order else strategy, len(runs)
    out: dict[int, T] = {}
    shown = 0

    def take(frames: Iterable[Any]) -> None:
        nonlocal shown
        for frame in frames:
            st.decoded += 1
            i = shown if output_order else rank.get(frame.pts)
            shown += 1
            if i is not None and i in want and i not in out:
                out[i] = convert(frame)
                st.converted += 1

    for run in runs:
        codec.flush_buffers()
        for p in range(run.start, run.end + 1):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{st.packets} of {len(packets)} packets decoded")
            # Frames nobody wants and nobody references need not be decoded at all.
            codec.skip_frame = "DEFAULT" if p in wanted_packets else "NONREF"
            st.packets += 1
            take(codec.decode(packets[p]))
            if output_order and len(out) == len(want):
                break  # frames are counted from the first: once the wanted ones are out, the rest is not needed
        codec.skip_frame = "DEFAULT"
        take(codec.decode(None))
    missing = sorted(want - out.keys())
    if missing:
        raise ValueError(f"frame {missing[0]} did not decode ({len(missing)} wanted frames missing)")
    return out
