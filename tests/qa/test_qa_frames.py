"""Frames for the endpoint VLM: time-uniform, display orientation, long side bounded."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from benchcheck.qa.frames import sample_jpegs
from benchcheck.video.synth import make_test_video, read_frame_index


def _decoded(jpegs: list[bytes]) -> list[Image.Image]:
    return [Image.open(io.BytesIO(j)) for j in jpegs]


def test_uniform_in_time_not_in_index(tmp_path: Path) -> None:
    """Irregular timestamps: the grid follows time (frames 0-9 span 1 s, 10-19 span 9 s)."""
    ts = [k * 0.1 for k in range(10)] + [1.0 + k for k in range(10)]
    clip = make_test_video(tmp_path / "vfr.mp4", n_frames=20, timestamps=ts)
    got = [read_frame_index(im) for im in _decoded(sample_jpegs(clip, 4, 0))]
    assert got == [10, 13, 15, 18]  # index-uniform would be [2, 7, 12, 17]


def test_rotation_and_size(tmp_path: Path) -> None:
    clip = make_test_video(tmp_path / "rot.mp4", n_frames=8, width=320, height=180, rotation=90)
    images = _decoded(sample_jpegs(clip, 3, 100))
    assert [im.size for im in images] == [(56, 100)] * 3
    assert [read_frame_index(im) for im in images] == [1, 3, 6]


def test_short_clip_gives_every_frame_once(tmp_path: Path) -> None:
    clip = make_test_video(tmp_path / "short.mp4", n_frames=3)
    images = _decoded(sample_jpegs(clip, 8, 0))
    assert [read_frame_index(im) for im in images] == [0, 1, 2]
    assert images[0].size == (320, 180)


def test_unreadable_clip_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\0" * 1000)
    with pytest.raises(ValueError, match=r"broken\.mp4"):
        sample_jpegs(bad, 4)
