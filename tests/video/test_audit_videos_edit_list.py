"""An mp4 cut without re-encoding (``ffmpeg -ss T -c copy``) keeps the frames from the keyframe
before T and an edit list that hides them: the decoder never shows them, so they are no frames
of the video. Normalized as frames, they shifted every stored frame by the hidden lead-in (and a
long lead-in failed the source as corrupt)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av

from benchcheck.video.decode import decode_frames
from benchcheck.video.index import read_index
from benchcheck.video.meta import read_meta, video_path
from benchcheck.video.synth import make_test_video, read_frame_index


def _bc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=300)


def _shown(path: Path) -> list[tuple[float, int]]:
    """(time from the first shown frame, painted index) of every frame the decoder shows."""
    with av.open(str(path)) as c:
        frames = [(float(f.pts * f.time_base), read_frame_index(f.to_ndarray(format="rgb24")))
                  for f in c.decode(video=0)]
    return [(t - frames[0][0], i) for t, i in frames]


def test_frames_hidden_by_an_edit_list_are_not_stored(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    # 10 fps; frames 0..4 sit before time 0 (the lead-in of a copy cut), 0.5 s of 8 s
    make_test_video(raw / "short_lead.mp4", 85, fps=10.0, width=128, height=72,
                    timestamps=[(i - 5) / 10 for i in range(85)])
    # a lead-in of 1 s in a 2 s clip
    make_test_video(raw / "long_lead.mp4", 30, fps=10.0, width=128, height=72,
                    timestamps=[(i - 10) / 10 for i in range(30)])
    shown = {name: _shown(raw / name) for name in ("short_lead.mp4", "long_lead.mp4")}
    assert shown["short_lead.mp4"][0] == (0.0, 5) and len(shown["short_lead.mp4"]) == 80  # what FFmpeg shows
    store = tmp_path / "store"
    r = _bc("videos", "normalize", str(raw), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    ids = read_index(store / "index.jsonl")
    for name, n_shown in (("short_lead.mp4", 80), ("long_lead.mp4", 20)):
        meta = read_meta(store, ids[f"local::raw::{name}"])
        assert meta.source["n_frames"] == n_shown and meta.duration == n_shown / 10
        assert meta.n_frames == n_shown // 5  # 2 fps
        stored = decode_frames(video_path(store, meta.content_hash), range(meta.n_frames),
                               lambda f: read_frame_index(f.to_ndarray(format="rgb24")))
        by_time = dict(shown[name])  # at 10 fps every slot time j / 2 is a shown frame's time
        assert [stored[j] for j in range(meta.n_frames)] == [by_time[j / 2] for j in range(meta.n_frames)]
