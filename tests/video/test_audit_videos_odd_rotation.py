"""A display matrix that is not a whole quarter turn (an odd angle, or one a hair off a quarter
turn) is applied to the nearest quarter turn: the output size was swapped for it while the frames
were not turned, so the stored picture was stretched into the other orientation."""

from __future__ import annotations

from pathlib import Path

from benchcheck.video.decode import decode_frames
from benchcheck.video.meta import read_meta, video_path
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video, read_frame_code


def test_odd_display_rotation_is_the_nearest_quarter_turn(tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_test_video(src / "tilt30.mp4", 4, width=320, height=180, rotation=30)
    make_test_video(src / "tilt100.mp4", 4, width=320, height=180, rotation=100)
    store = tmp_path / "store"
    report = normalize_videos([src], store)
    got = {Path(o.path).name: o.content_hash for o in report.outcomes}
    expect = {"tilt30.mp4": ((320, 180), 0, 0), "tilt100.mp4": ((180, 320), 90, 1)}
    for name, (size, rotation, turns) in expect.items():
        vid = got[name]
        assert vid is not None, report.outcomes
        meta = read_meta(store, vid)
        assert ((meta.width, meta.height), meta.source["rotation"]) == (size, rotation)
        rgb = decode_frames(video_path(store, vid), [2], lambda f: f.to_ndarray(format="rgb24"))[2]
        assert read_frame_code(rgb) == (2, turns)


def test_quarter_turn() -> None:
    from benchcheck.video.normalize import quarter_turn

    assert [quarter_turn(d) for d in (0, 29, 46, 89, 135, 136, -90, -1, 359)] == [0, 0, 90, 90, 90, 180, 270, 0, 0]
