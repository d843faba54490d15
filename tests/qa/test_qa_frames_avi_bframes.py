"""The samplers that read a raw clip (``qa``'s endpoint frames, ``serve``'s ``video_url`` parts) on
H.264 with B-frames in AVI: its demuxer stamps the packets in decode order, so a frame taken by
the rank of its pts was a B-frame's neighbour, not the frame the grid asks for. Frame k is now the
decoder's k-th frame out, as ``videos normalize`` already took it."""

from __future__ import annotations

from pathlib import Path

from benchcheck.qa.frames import sample_jpegs
from benchcheck.serve.media import decode_frames, sample_indices
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import make_test_video, read_frame_index

N, FPS = 40, 10


def _avi(path: Path) -> Path:
    return make_test_video(path, N, fps=FPS, width=160, height=96, bframes=3, container="avi")


def test_qa_frames_of_an_avi_with_b_frames_are_the_grid_frames(tmp_path: Path) -> None:
    clip = _avi(tmp_path / "clip.avi")
    times = [i / FPS for i in range(N)]
    assert [read_frame_index(j) for j in sample_jpegs(clip, 12)] == uniform_grid(times, 12)


def test_served_frames_of_an_avi_with_b_frames_are_the_kth_frames(tmp_path: Path) -> None:
    data = _avi(tmp_path / "clip.avi").read_bytes()
    assert [read_frame_index(j) for j in decode_frames(data, 12)] == sample_indices(N, 12)


def test_only_an_avi_is_probed_for_decode_order_pts(tmp_path: Path) -> None:
    # Other containers carry presentation times: probing them decoded frames for nothing on every
    # clip a request sent (a third of a served 720p request's CPU).
    from benchcheck.video.decode import by_output_order, open_video, read_packets

    mp4 = make_test_video(tmp_path / "clip.mp4", N, fps=FPS, width=160, height=96, bframes=0)
    for path, want in ((_avi(tmp_path / "clip.avi"), True), (mp4, False)):
        container, stream = open_video(path)
        try:
            packets, index = read_packets(container, stream)
            assert by_output_order(container, stream, packets, index) is want
        finally:
            container.close()
    assert [read_frame_index(j) for j in sample_jpegs(mp4, 12)] == uniform_grid([i / FPS for i in range(N)], 12)


def test_the_decode_order_check_keeps_the_decode_time_limit_and_stops_when_frames_are_out(tmp_path: Path) -> None:
    # serve's --video-decode-timeout covered only the frames' decode: the check before it read up
    # to every packet of a clip that gives no frame. And counted from the first frame, a decode
    # in output order went on to the clip's end after the wanted frames were out.
    import time

    import pytest

    from benchcheck.video.decode import DecodeStats, decode_indexed, open_video, pts_in_decode_order, read_packets

    container, stream = open_video(_avi(tmp_path / "clip.avi"))
    try:
        packets, index = read_packets(container, stream)
        with pytest.raises(TimeoutError):
            pts_in_decode_order(stream.codec_context, packets, deadline=time.monotonic() - 1)
        stats = DecodeStats()
        got = decode_indexed(stream.codec_context, packets, index, [0, 3], lambda f: f.pts, stats=stats,
                             output_order=True)
    finally:
        container.close()
    assert sorted(got) == [0, 3] and stats.packets < len(packets) // 2
