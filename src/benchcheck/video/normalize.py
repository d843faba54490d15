"""Normalize one video file (docs/PROTOCOL.md, "Videos"): 2 fps (at most 1,024 frames), short side 720
(480 beyond 30 minutes), never upscaled, upright, H.264 in mp4.

Two passes over the source: a demux pass (no decoding) lists every frame's timestamp, so the
output slots ``t_j = j / fps_out`` are matched to source frames (the nearest, ties to the
earlier) before any decoding and a truncated file is caught; then one decoding pass converts
and encodes only the frames that fill a slot. The output's own timestamps, read back from the
written file, go to ``meta.json``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeGuard

from benchcheck.video.cut_end import cut_end, last_frame_cut
from benchcheck.video.decode import PacketIndex, open_video, pts_in_decode_order, quarter_turn, read_packets
from benchcheck.video.meta import TOO_SHORT_FRAMES, VideoMeta
from benchcheck.video.plans import nearest_index
from benchcheck.video.truncation import stream_duration, truncation

NORMALIZER_VERSION = 1
STORE_FPS = 2.0
MAX_STORED_FRAMES = 1024
SHORT_SIDE = 720
LONG_VIDEO_S = 30 * 60
LONG_SHORT_SIDE = 480
# Keyframe interval of the store, chosen from its size / extraction-speed trade-off
# (see decision 033): 32 frames = 16 s at 2 fps.
STORE_GOP = 32
# CAVLC instead of CABAC: the store spends bytes for decoding speed (see decision 033), since
# frames are decoded many times (every plan, every sweep condition).
STORE_X264_PARAMS = "cabac=0"
STORE_CRF = 23
STORE_PRESET = "fast"
# More than this share of output frames that did not decode makes the source corrupt.
MAX_MISSING = 0.05

class NormalizeError(ValueError):
    """The source cannot be normalized; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the normalized video will be: its size and which source frame fills each slot."""

    width: int
    height: int
    fps: float
    slot_times: list[float]
    slot_frames: list[int]
    rotation: int


def content_hash_of(source_sha256: str) -> str:
    """The video_id of a normalized video: the first 32 hex digits of its source's sha256."""
    return source_sha256[:32]


def _even(v: float) -> int:
    return max(2, 2 * math.floor(v / 2 + 0.5))


def output_size(width: int, height: int, duration: float) -> tuple[int, int]:
    """Short side 720 (480 for videos longer than 30 min), never upscaled, even sides."""
    short = LONG_SHORT_SIDE if duration > LONG_VIDEO_S else SHORT_SIDE
    scale = min(1.0, short / min(width, height))
    return _even(width * scale), _even(height * scale)


def output_slots(duration: float) -> tuple[float, list[float]]:
    """(stored fps, slot times): 2 fps over ``[0, duration)``, or 1,024 evenly spaced slots."""
    n = max(1, math.ceil(duration * STORE_FPS - 1e-9))
    fps = STORE_FPS
    if n > MAX_STORED_FRAMES:
        n, fps = MAX_STORED_FRAMES, MAX_STORED_FRAMES / duration
    return fps, [j / fps for j in range(n)]


def plan_target(times: list[float], frame_duration: float, width: int, height: int, rotation: int) -> Target:
    """Match output slots to source frames (pure; a truncated source is failed before, by
    :func:`benchcheck.video.truncation.truncation`)."""
    duration = times[-1] + frame_duration
    dw, dh = (height, width) if rotation % 180 else (width, height)
    w, h = output_size(dw, dh, duration)
    fps, slots = output_slots(duration)
    return Target(w, h, fps, slots, [nearest_index(times, t) for t in slots], rotation)


def _usable(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value > 0


def frame_times(pts_times: list[float], rate: float | None, declared: float | None) -> tuple[list[float], bool]:
    """(frame times, retimed): the frames' own timestamps, or, when they carry none (every packet
    has the same pts, as in a VP9 webm written without timestamps), times from the stream's frame
    rate, else from its declared duration (:func:`assumed_timing` says which in words). Raises
    :class:`NormalizeError` when neither is known. Pure: the caller reads ``rate`` and
    ``declared`` from the stream."""
    n = len(pts_times)
    if n < 2 or len(set(pts_times)) == n:
        return pts_times, False
    if len(set(pts_times)) > 1:  # some distinct, some repeated: not a timeline we can trust
        raise NormalizeError(f"frames have repeated timestamps ({n - len(set(pts_times))} of {n})")
    if _usable(rate):
        return [i / rate for i in range(n)], True
    if _usable(declared):
        return [i * declared / n for i in range(n)], True
    raise NormalizeError(f"frames carry no timestamps (all {n} have the same pts) and the stream declares "
                         "no frame rate or duration to time them by")


def assumed_timing(rate: float | None, rate_from: str, declared: float | None) -> str:
    """What :func:`frame_times` assumed to time frames that carry no timestamps, in one line (pure).

    Such a stream has no times of its own, so its frames are spread evenly: right for a constant
    rate only. A raw H.264 stream's declared rate is one frame a tick of the clock its SPS
    declares, which for a variable rate is the encoder's time base, not a frame rate, and the
    stream does not tell which it is (see decision 134)."""
    if _usable(rate):
        how = f"as a constant {rate:g} fps, {rate_from}"
    else:
        how = f"evenly over the {declared:g} s its file declares"
    return f"its frames carry no timestamps: timed {how}; if its frame rate varies, its times are wrong"


def _stream_rate(stream: Any) -> tuple[float | None, str]:
    """The frame rate an untimed stream is timed by and where it comes from, in words: the rate
    its codec declares (an H.264 stream's own timing) first, then FFmpeg's guess; a raw stream's
    average rate is the demuxer's default, not the stream's. FFmpeg's guess comes from the
    timestamps the demuxer saw where the codec's rate is not far below it: a program stream that
    stamps one frame in several gave a fraction of its rate, and its clip was stored that many
    times too long."""
    if rate := stream.codec_context.framerate:
        return float(rate), "the rate its codec declares"
    for rate in (stream.guessed_rate, stream.average_rate, stream.base_rate):
        if rate:
            return float(rate), "FFmpeg's guess"
    return None, ""


def _display_width(stream: Any) -> int:
    sar = stream.sample_aspect_ratio
    w = int(stream.codec_context.width)
    return max(2, round(w * sar)) if sar and sar != 1 else w


@dataclass(slots=True)
class OpenSource:
    """A source opened for normalizing: its packets in memory, the output plan, its facts."""

    container: Any
    stream: Any
    packets: list[Any]
    index: PacketIndex
    target: Target
    facts: dict[str, Any]
    # True when the frames had no timestamps of their own and were timed by rate or count:
    # decoded frames are then matched by their output order, not their (meaningless) pts.
    retimed: bool = False
    # True when the packets' pts follow decode order, not presentation order (H.264 with B-frames
    # in AVI): the decoder's output order is then the frames' order, as for retimed ones.
    decode_order_pts: bool = False

    @property
    def by_output_order(self) -> bool:
        return self.retimed or self.decode_order_pts


def probe(path: Path, threads: int) -> OpenSource:
    """Open the source, list its frames and plan the output; the caller closes the container."""
    if not path.is_file():
        raise NormalizeError("not a file")
    if path.stat().st_size == 0:
        raise NormalizeError("empty file (0 bytes)")
    # One frame at a time: a damaged source gets one result whatever the threads (open_video).
    container, stream = open_video(path, threads, frame_threads=False)
    try:
        if last_frame_cut(container.format.name) is not None:
            # A program or transport stream cut between two packets is told by its last frame,
            # which the decoder flags as concealed only when it decodes without threads (the decoder is not
            # open yet, so this still takes): with slice threads the cut one was stored.
            stream.codec_context.thread_count = 1
        # the duration check below has nothing to compare with for a stream that declares no
        # duration: a cut one was stored as the shorter video its packets make
        if why := cut_end(container.format.name, path):
            raise NormalizeError(why)
        packets, index = read_packets(container, stream)
        rate, rate_from = _stream_rate(stream)
        times, retimed = frame_times(index.timestamps, rate, stream_duration(stream))
        spacing = sorted(b - a for a, b in itertools.pairwise(times))
        frame_duration = spacing[len(spacing) // 2] if spacing else 1 / STORE_FPS
        rotation = _rotation(stream, packets, index)
        decode_order_pts = not retimed and pts_in_decode_order(stream.codec_context, packets)
        width, height = _display_width(stream), int(stream.codec_context.height)
        # the samplers of raw clips (qa, serve) hold a clip to the same rule
        if why := truncation(container, stream, packets, index):
            raise NormalizeError(why)
        target = plan_target(times, frame_duration, width, height, rotation)
    except BaseException:
        container.close()
        raise
    facts = {"width": width, "height": height, "rotation": rotation, "codec": stream.codec_context.name,
             "n_frames": len(times), "duration": round(times[-1] + frame_duration, 6),
             "fps": round(len(times) / (times[-1] + frame_duration), 6), "retimed": retimed,
             "decode_order_pts": decode_order_pts}
    if retimed:  # said where the store keeps it, and on the run's output (store.normalize_one)
        facts["timing"] = assumed_timing(rate, rate_from, stream_duration(stream))
    return OpenSource(container, stream, packets, index, target, facts, retimed, decode_order_pts)


def _rotation(stream: Any, packets: list[Any], index: PacketIndex) -> int:
    """The display rotation (degrees counter-clockwise), read from the first decodable frame, to
    the nearest quarter turn: the frames are turned by whole quarter turns and the output size
    follows the angle, so an angle between quarter turns (an odd matrix, or one a hair off a
    quarter turn, which PyAV reads rounded down) stretched the picture into a swapped size unturned."""
    codec = stream.codec_context
    for p in packets[index.keyframes[0]:index.keyframes[0] + 16]:
        for frame in codec.decode(p):
            codec.flush_buffers()
            return quarter_turn(float(frame.rotation or 0))
    codec.flush_buffers()
    return 0


def _encoder(out: Any, target: Target, gop: int, x264_params: str) -> Any:
    stream = out.add_stream("libx264", rate=Fraction(target.fps).limit_denominator(1000))
    stream.width, stream.height, stream.pix_fmt = target.width, target.height, "yuv420p"
    stream.time_base = Fraction(1, 1000)
    stream.codec_context.time_base = Fraction(1, 1000)
    stream.codec_context.gop_size = gop
    options = {"preset": STORE_PRESET, "crf": str(STORE_CRF), "keyint_min": str(gop), "sc_threshold": "0"}
    if x264_params:
        options["x264-params"] = x264_params
    stream.codec_context.options = options
    return stream


def _converter(target: Target) -> Callable[[Any], Any]:
    import av
    import numpy as np
    from av.video.reformatter import Interpolation

    flags = Interpolation.AREA | Interpolation.ACCURATE_RND | Interpolation.BITEXACT
    turns = (target.rotation // 90) % 4

    def convert(frame: Any) -> Any:
        if not turns:
            return frame.reformat(width=target.width, height=target.height, format="yuv420p",
                                  interpolation=flags, threads=1)
        w, h = (target.height, target.width) if turns % 2 else (target.width, target.height)
        rgb = frame.reformat(width=w, height=h, format="rgb24", interpolation=flags, threads=1).to_ndarray()
        upright = av.VideoFrame.from_ndarray(np.ascontiguousarray(np.rot90(rgb, k=turns)), format="rgb24")
        return upright.reformat(format="yuv420p", interpolation=flags, threads=1)

    return convert


def transcode(source: Path, dest: Path, threads: int = 1, gop: int = STORE_GOP,
              x264_params: str = STORE_X264_PARAMS) -> tuple[Target, dict[str, Any]]:
    """Write the normalized ``dest`` mp4 from ``source``; returns the plan and the source facts.

    ``gop`` and ``x264_params`` are the store's (:data:`STORE_GOP`, :data:`STORE_X264_PARAMS`)
    unless a benchmark varies them.
    """
    import av

    try:
        src = probe(source, threads)
    except NormalizeError:
        raise
    except (OSError, ValueError, av.error.FFmpegError) as e:
        raise NormalizeError(_reason(e)) from e
    container, packets, index, target = src.container, src.packets, src.index, src.target
    convert = _converter(target)
    codec = src.stream.codec_context
    rank = {pts: i for i, pts in enumerate(index.pts)}
    wanted = set(target.slot_frames)
    missing = 0
    shown = 0  # frames the decoder gave out so far: their presentation rank by output order
    try:
        with av.open(str(dest), "w", format="mp4") as out:
            enc = _encoder(out, target, gop, x264_params)
            j, last = 0, None

            def emit(frame: Any) -> None:
                nonlocal j
                frame.pts = round(target.slot_times[j] * 1000)
                frame.time_base = Fraction(1, 1000)
                for packet in enc.encode(frame):
                    out.mux(packet)
                j += 1

            def take(frames: Any) -> None:
                nonlocal last, missing, shown
                for frame in frames:
                    r = shown if src.by_output_order else rank.get(frame.pts)
                    shown += 1
                    if r is None or r not in wanted:
                        continue
                    while j < len(target.slot_frames) and target.slot_frames[j] < r:
                        missing += 1
                        emit(last if last is not None else convert(frame))
                    last = convert(frame)
                    while j < len(target.slot_frames) and target.slot_frames[j] == r:
                        emit(last)

            codec.flush_buffers()
            wanted_packets = {index.packet_of[r] for r in wanted}
            # A program or transport stream cut exactly between two of its units ends whole to
            # cut_end: its last packet is decoded whatever the slots, and the frames out from it on
            # (the flush gives the last ones) say whether the cut split its frame.
            tail_cut = last_frame_cut(container.format.name)
            end = len(packets) - 1
            seen_before, whole_before, end_frames, end_refused = False, False, [], False
            for pos, p in enumerate(packets):
                # Most source frames fill no slot; those no other frame references are not decoded.
                # (Frames matched by output order are counted as they come out: none may be skipped.)
                at_end = tail_cut is not None and pos == end
                codec.skip_frame = "DEFAULT" if src.by_output_order or pos in wanted_packets or at_end else "NONREF"
                frames = _decoded(codec, p)
                if at_end:
                    end_frames, end_refused = list(frames or []), frames is None
                elif frames:
                    seen_before = True
                    whole_before = whole_before or any(not f.is_corrupt for f in frames)
                take(frames or [])
            codec.skip_frame = "DEFAULT"
            flushed = _decoded(codec, None) or []
            end_frames += flushed
            take(flushed)
            # A stream whose every earlier frame is flagged too (no keyframe the decoder recovers
            # at) says nothing by its last one: only a flag that follows whole frames, or that no
            # frame precedes (a cut inside the first frames), is the cut.
            damaged_end = end_refused or any(f.is_corrupt for f in end_frames)
            if tail_cut is not None and damaged_end and (whole_before or not seen_before):
                raise NormalizeError(tail_cut)
            if last is None:
                raise NormalizeError("no frame decoded")
            while j < len(target.slot_frames):
                missing += 1
                emit(last)
            for packet in enc.encode():
                out.mux(packet)
    except NormalizeError:
        raise
    except (OSError, ValueError, av.error.FFmpegError) as e:
        raise NormalizeError(_reason(e)) from e
    finally:
        container.close()
    if missing > MAX_MISSING * len(target.slot_frames):
        raise NormalizeError(f"corrupt: {missing} of {len(target.slot_frames)} output frames did not decode")
    return target, src.facts


def _decoded(codec: Any, packet: Any) -> list[Any] | None:
    """The frames one packet gives; None when the decoder refuses it as damaged. Its frames are
    then missing from the output and counted (more than :data:`MAX_MISSING` fails the source)."""
    import av

    try:
        return list(codec.decode(packet))
    except av.error.InvalidDataError:
        return None


def _reason(e: BaseException) -> str:
    """One line without the file name (the failure row has it)."""
    strerror = getattr(e, "strerror", None)
    if getattr(e, "log", None) is not None or type(e).__module__.startswith("av"):
        text = f"not a readable video (corrupt, truncated or not a video): {strerror or e}"
    else:
        text = str(e)
    return " ".join(text.split())[:300] or type(e).__name__


def stored_meta(dest: Path, content_hash: str, target: Target, source: dict[str, Any]) -> VideoMeta:
    """The ``meta.json`` of a written normalized video, timestamps read back from the file."""
    container, stream = open_video(dest)
    try:
        _, index = read_packets(container, stream)
        width, height = int(stream.codec_context.width), int(stream.codec_context.height)
    finally:
        container.close()
    ts = [round(t, 6) for t in index.timestamps]
    n = len(ts)
    duration = float(source["duration"])
    return VideoMeta(
        content_hash=content_hash, width=width, height=height, duration=duration,
        fps=round(target.fps, 6), n_frames=n, timestamps=ts, too_short=n <= TOO_SHORT_FRAMES,
        source=source,
        normalizer={"version": NORMALIZER_VERSION, "codec": "h264", "encoder": "libx264",
                    "crf": STORE_CRF, "preset": STORE_PRESET, "gop": STORE_GOP,
                    "x264_params": STORE_X264_PARAMS,
                    "short_side": SHORT_SIDE if duration <= LONG_VIDEO_S else LONG_SHORT_SIDE},
    )
