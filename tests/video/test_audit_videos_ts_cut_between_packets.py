"""An MPEG transport stream cut exactly between two of its 188-byte packets fails as truncated, as
a program stream cut between its packets does. The file still ends on whole transport packets,
so the byte check of ``cut_end`` read it as whole, and a transport stream declares no duration
to check its frames against: it was stored as the shorter video, without a word. The cut
splits the last frame's data (a muxer ends each frame's packet on a transport packet of its
own), which the demuxer hands on as it is and the decoder conceals. Whole files, with audio or
B-frames, keep every frame."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from truncation_helpers import N_FRAMES, Silence, make_clip

from benchcheck.video.cut_end import cut_end
from benchcheck.video.normalize import NormalizeError, transcode
from benchcheck.video.synth import make_test_video, read_frame_index

TS = 188
N = 40
# name -> a whole transport stream's maker and its frame count
CLIPS = {
    "bframes": (lambda p: make_test_video(p, N, fps=10.0, textured=True, container="mpegts"), N),
    "no_bframes": (lambda p: make_test_video(p, N, fps=10.0, textured=True, bframes=0, container="mpegts"), N),
    "audio": (lambda p: make_clip(p, "mpegts", audio=Silence("aac", 48000, "fltp", 1024, 5)), N_FRAMES),
}


@pytest.fixture(scope="module", params=sorted(CLIPS))
def whole(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> tuple[Path, int]:
    make, n = CLIPS[request.param]
    return make(tmp_path_factory.mktemp("ts") / "whole.ts"), n


def _video_packets(data: bytes) -> list[tuple[int, bool]]:
    """(packet number, starts a frame) of the video's transport packets (PES stream ids E0-EF)."""
    pid, out = None, []
    for k in range(len(data) // TS):
        b = data[k * TS:(k + 1) * TS]
        this = (b[1] & 0x1F) << 8 | b[2]
        start = bool(b[1] & 0x40)
        if pid is None and start:
            at = 4 + (1 + b[4] if b[3] & 0x20 else 0)
            if b[at:at + 3] == b"\x00\x00\x01" and b[at + 3] >> 4 == 0xE:
                pid = this
        if this == pid:
            out.append((k, start))
    return out


def _cuts_inside_frames(data: bytes, count: int) -> list[int]:
    """Sizes (multiples of 188) of cuts that split a frame's data, spread over the file: each keeps a
    video packet that two more of its frame follow (a cut that leaves out only a frame's last few
    bytes, in its last packet, can leave every picture element to decode)."""
    video = _video_packets(data)
    inside = [(k + 1) * TS for (k, _), (_, a), (_, b) in zip(video, video[1:], video[2:], strict=False)
              if not a and not b]
    step = max(1, len(inside) // count)
    return inside[step // 2::step][:count]


def _stored(path: Path) -> list[int]:
    with av.open(str(path)) as c:
        return [read_frame_index(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]


@pytest.mark.parametrize("threads", [1, 4])
def test_a_whole_transport_stream_keeps_every_frame(tmp_path: Path, whole: tuple[Path, int], threads: int) -> None:
    src, n = whole
    _, facts = transcode(src, tmp_path / "o.mp4", threads)
    assert facts["n_frames"] == n
    with av.open(str(src)) as c:
        source = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    fps = round(n / facts["duration"])
    want = [read_frame_index(f) for f in source][::fps // 2]  # the 2 fps slots
    assert _stored(tmp_path / "o.mp4") == want
    with av.open(str(tmp_path / "o.mp4")) as c:
        for got, ref in zip(c.decode(video=0), source[::fps // 2], strict=True):
            assert np.abs(got.to_ndarray(format="rgb24").astype(np.int16) - ref.astype(np.int16)).mean() < 6


# threads: the decoder flags the cut frame only without slice threads; the outcome is the same
# whatever --workers leaves each source
@pytest.mark.parametrize("threads", [1, 4])
def test_a_transport_stream_cut_between_packets_fails_as_truncated(tmp_path: Path, whole: tuple[Path, int],
                                                                   threads: int) -> None:
    src, _ = whole
    data = src.read_bytes()
    cuts = _cuts_inside_frames(data, 6)
    assert len(cuts) == 6
    for size in cuts:
        cut = tmp_path / f"cut{size}.ts"
        cut.write_bytes(data[:size])
        assert cut_end("mpegts", cut) is None  # whole transport packets: the byte check cannot tell
        with pytest.raises(NormalizeError, match=r"^truncated: the MPEG-TS file ends inside its last frame"):
            transcode(cut, tmp_path / "o.mp4", threads)
