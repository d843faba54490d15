"""``decode.decode_through``: the one decode-with-deadline pass behind ``fill_missing_pts`` (a
refused packet skipped) and ``pts_in_decode_order`` (a refused packet ends the frames), on a real
clip with a packet of zeros the H.264 decoder refuses."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import av
import pytest

from benchcheck.video.decode import decode_through, open_video
from benchcheck.video.synth import make_test_video

N, DAMAGED_AT = 12, 6


def _packets(tmp_path: Path) -> tuple[Any, Any, list[Any]]:
    # ultrafast writes no B-frames: one frame out for each packet in
    clip = make_test_video(tmp_path / "c.mp4", N, fps=10, width=96, height=64, preset="ultrafast", gop=4)
    container, stream = open_video(clip)
    packets = [p for p in container.demux(stream) if p.size]
    return container, stream.codec_context, [*packets[:DAMAGED_AT], av.Packet(bytes(64)), *packets[DAMAGED_AT:]]


@pytest.mark.parametrize(("on_error", "frames"), [("skip", N), ("stop", DAMAGED_AT)])
def test_a_refused_packet_is_skipped_or_ends_the_frames(tmp_path: Path, on_error: Any, frames: int) -> None:
    container, codec, packets = _packets(tmp_path)
    with container, contextlib.closing(decode_through(codec, packets, None, "the pass", on_error)) as out:
        assert len(list(out)) == frames


def test_past_the_deadline_no_packet_is_decoded(tmp_path: Path) -> None:
    container, codec, packets = _packets(tmp_path)
    with container, pytest.raises(TimeoutError, match=r"^the pass ran past the decode's time limit$"):
        list(decode_through(codec, packets, time.monotonic() - 1, "the pass", "skip"))


def test_stopped_early_the_decoder_is_left_flushed(tmp_path: Path) -> None:
    # B-frames: the decoder holds frames back, which a pass stopped early leaves in it
    clip = make_test_video(tmp_path / "b.mp4", N, fps=10, width=96, height=64, bframes=2)
    container, stream = open_video(clip)
    codec = stream.codec_context
    with container:
        packets = [p for p in container.demux(stream) if p.size]
        with contextlib.closing(decode_through(codec, packets, None, "the pass", "stop")) as out:
            next(out)
        # left mid-stream, it gave out the frames it held before the next pass's
        assert list(codec.decode(None)) == []
