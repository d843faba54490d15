"""A raw H.264 elementary stream (what some cameras and ``ffmpeg -f h264`` write, often under an
``.mp4`` name) carries no timestamps at all. Its packets were dropped for their missing pts, so a
clip of good frames failed as ``the video stream has no decodable frames`` in ``videos normalize``
and in ``qa``'s sampler. It is now untimed, as a stream whose pts are all the same: stored timed
by its frame rate, its frames in the decoder's output order (B-frames included)."""

from __future__ import annotations

import io
from pathlib import Path

import av
from PIL import Image

from benchcheck.qa.frames import sample_jpegs
from benchcheck.video.normalize import transcode
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import make_test_video, read_frame_index

N, FPS = 20, 10


def _raw_h264(path: Path) -> Path:
    return make_test_video(path, N, fps=FPS, width=96, height=64, preset="ultrafast", bframes=2, container="h264")


def test_a_raw_h264_stream_is_stored_timed_by_its_rate(tmp_path: Path) -> None:
    clip = _raw_h264(tmp_path / "camera.mp4")
    with av.open(str(clip)) as c:
        assert all(p.pts is None for p in c.demux(video=0))
    _, facts = transcode(clip, tmp_path / "out.mp4")
    assert (facts["n_frames"], facts["retimed"]) == (N, True)
    with av.open(str(tmp_path / "out.mp4")) as c:
        stored = [read_frame_index(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    assert stored == list(range(0, N, FPS // 2))  # 2 fps slots over its frames at its rate


def test_qa_samples_a_raw_h264_stream(tmp_path: Path) -> None:
    clip = _raw_h264(tmp_path / "camera.mp4")
    got = [read_frame_index(Image.open(io.BytesIO(j))) for j in sample_jpegs(clip, 6)]
    assert got == uniform_grid([float(i) for i in range(N)], 6)
