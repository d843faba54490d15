"""The samplers that read a raw clip (``qa``'s endpoint frames, ``serve``'s ``video_url`` parts) on a
clip without timestamps (a VP9 webm whose packets all carry pts 0), which ``videos normalize``
stores timed by its frame rate: taken by pts, every frame but one was missing and the clip failed
(``frame 0 did not decode``). Its frames are now evenly spaced in the decoder's output order."""

from __future__ import annotations

from pathlib import Path

import av

from benchcheck.qa.frames import sample_jpegs
from benchcheck.serve.media import decode_frames, sample_indices
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import paint_frame, read_frame_index

N = 20


def _pts0_webm(path: Path) -> Path:
    with av.open(str(path), "w", format="webm") as out:
        stream = out.add_stream("libvpx-vp9", rate=10)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        for i in [*range(N), None]:
            frame = None
            if i is not None:
                frame = av.VideoFrame.from_ndarray(paint_frame(i, 96, 64), format="rgb24")
                frame.pts = i
            for packet in stream.encode(frame):
                packet.pts = packet.dts = 0
                out.mux(packet)
    return path


def test_qa_frames_of_a_clip_without_timestamps_are_evenly_spaced(tmp_path: Path) -> None:
    clip = _pts0_webm(tmp_path / "nots.webm")
    assert [read_frame_index(j) for j in sample_jpegs(clip, 6)] == uniform_grid([float(i) for i in range(N)], 6)


def test_served_frames_of_a_clip_without_timestamps_are_the_kth_frames(tmp_path: Path) -> None:
    data = _pts0_webm(tmp_path / "nots.webm").read_bytes()
    assert [read_frame_index(j) for j in decode_frames(data, 6)] == sample_indices(N, 6)
