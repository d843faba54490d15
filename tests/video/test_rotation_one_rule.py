"""Every reader of a frame's display rotation turns it to the same quarter turn: the store
(``videos normalize``), the ``qa`` frame sampler and ``extract.frame_to_jpeg``. The sampler and
``frame_to_jpeg`` rounded the angle down, so a clip a hair short of a quarter turn came out
unturned there and turned in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchcheck.qa.frames import display_size, sample_jpegs
from benchcheck.video.decode import decode_frames
from benchcheck.video.extract import _jpeg_size, frame_to_jpeg
from benchcheck.video.meta import read_meta, video_path
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video, read_frame_code


@pytest.mark.parametrize(("angle", "size", "turns"), [(89.99, (180, 320), 1), (150, (320, 180), 2)])
def test_every_reader_turns_an_odd_rotation_alike(tmp_path: Path, angle: float, size: tuple[int, int],
                                                  turns: int) -> None:
    src = make_test_video(tmp_path / "src" / "tilt.mp4", 4, width=320, height=180, rotation=angle)

    report = normalize_videos([src.parent], tmp_path / "store")
    vid = report.outcomes[0].content_hash
    assert vid is not None, report.outcomes
    meta = read_meta(tmp_path / "store", vid)
    stored = decode_frames(video_path(tmp_path / "store", vid), [2], lambda f: f.to_ndarray(format="rgb24"))[2]
    assert ((meta.width, meta.height), read_frame_code(stored)) == (size, (2, turns))

    jpeg = decode_frames(src, [2], lambda f: frame_to_jpeg(f, *display_size(f, 0)))[2]
    assert (_jpeg_size(jpeg), read_frame_code(jpeg)) == (size, (2, turns))

    sampled = sample_jpegs(src, 4)
    assert [(_jpeg_size(j), read_frame_code(j)[1]) for j in sampled] == [(size, turns)] * 4
