"""An MPEG program stream (``.mpg``) of H.264 whose PES packets start more than one frame (small
frames, or B-frames) stamps only the first of them: the demuxer hands on the others without a pts.
Frames without a pts were dropped from the index and the decoder's frames without one were taken
for no frame, so a 40-frame clip was stored as 3 frames (26 when textured) and sampled alike.
Its stamped frames keep their times and the others are timed between them in the decoder's
output order (a variable frame rate: test_audit_videos_partial_pts_vfr). Every stored frame is
checked against a decode of the source."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from benchcheck.qa.frames import sample_jpegs
from benchcheck.serve.media import decode_frames, sample_indices
from benchcheck.video.normalize import transcode
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import make_test_video, read_frame_index

N = 40
# (container, make_test_video options): the program stream cases each left frames without a pts
# (B-frames or not); the transport stream, which stamps every frame, is the same content.
CASES = {
    "plain.mpg": ("mpeg", {}),
    "no_bframes.mpg": ("mpeg", {"bframes": 0}),
    "textured.mpg": ("mpeg", {"textured": True}),
    "plain.ts": ("mpegts", {}),
    "textured.ts": ("mpegts", {"textured": True}),
}


def _clip(folder: Path, name: str, fps: float) -> Path:
    container, options = CASES[name]
    return make_test_video(folder / name, N, fps=fps, container=container, **options)


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_frame_is_stored(tmp_path: Path, name: str) -> None:
    src = _clip(tmp_path, name, 2.0)
    if name.endswith(".mpg"):  # the case: frames the demuxer gives without a pts
        with av.open(str(src)) as c:
            assert any(p.pts is None for p in c.demux(video=0) if p.size)
    source = _frames(src)
    assert [read_frame_index(f) for f in source] == list(range(N))
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert (facts["n_frames"], facts["duration"]) == (N, 20.0)
    stored = _frames(tmp_path / "o.mp4")
    assert [read_frame_index(f) for f in stored] == list(range(N))  # 2 fps slots of a 2 fps source
    for k, (got, want) in enumerate(zip(stored, source, strict=True)):
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16)).mean()
        assert diff < 6, f"stored frame {k} differs from source frame {k} by {diff:.1f} on average"


@pytest.mark.parametrize("name", ["plain.mpg", "textured.mpg"])
def test_slots_are_timed_by_the_frames_times(tmp_path: Path, name: str) -> None:
    src = _clip(tmp_path, name, 10.0)
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert (facts["n_frames"], facts["duration"]) == (N, 4.0)
    assert [read_frame_index(f) for f in _frames(tmp_path / "o.mp4")] == list(range(0, N, 5))


@pytest.mark.parametrize("name", ["plain.mpg", "textured.mpg", "plain.ts"])
def test_qa_and_serve_sample_the_right_frames(tmp_path: Path, name: str) -> None:
    src = _clip(tmp_path, name, 2.0)
    got = [read_frame_index(Image.open(io.BytesIO(j))) for j in sample_jpegs(src, 8)]
    assert got == uniform_grid([float(i) for i in range(N)], 8)
    served = [read_frame_index(Image.open(io.BytesIO(j))) for j in decode_frames(src.read_bytes(), 8)]
    assert served == sample_indices(N, 8)


def test_keyframes_without_a_pts_are_read_not_a_traceback(tmp_path: Path) -> None:
    # a keyframe left without a pts made the index compare a pts with None: a TypeError, which
    # neither qa's nor serve's one-line catch took
    src = make_test_video(tmp_path / "gop.mpg", N, fps=10.0, gop=10, container="mpeg")
    with av.open(str(src)) as c:
        assert any(p.pts is None for p in c.demux(video=0) if p.is_keyframe)
    served = [read_frame_index(Image.open(io.BytesIO(j))) for j in decode_frames(src.read_bytes(), 8)]
    assert served == sample_indices(N, 8)
    got = [read_frame_index(Image.open(io.BytesIO(j))) for j in sample_jpegs(src, 8)]
    assert got == uniform_grid([float(i) for i in range(N)], 8)
    _, facts = transcode(src, tmp_path / "o.mp4")
    assert facts["n_frames"] == N
    assert [read_frame_index(f) for f in _frames(tmp_path / "o.mp4")] == list(range(0, N, 5))
