"""A raw H.264 elementary stream (``.h264``, no container) carries no timestamps: it is timed as a
constant rate, the one its SPS declares, which for a variable-rate stream is its clock's tick
(x264 writes its encoder's time base there: 1/1000 s gives 1000 fps) and not a frame rate, and
the stream does not say which (decision 134). The times are not there to be found, so the
assumption is stated: in ``meta.json`` (``source.timing``) and in one ``warning:`` line for the
file on the run's stderr. Stored as is, a variable-rate clip of 6 s became 10 ms, one stored
frame, without a word."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.meta import read_meta
from benchcheck.video.normalize import assumed_timing, transcode
from benchcheck.video.synth import make_test_video

# a camera that drops frames: 10 frames over 6 s, gaps of 0.1 to 1.8 s
VFR_TIMES = [0.0, 0.1, 0.2, 1.5, 1.6, 3.0, 3.1, 3.2, 5.0, 6.0]
ASSUMED = ("its frames carry no timestamps: timed as a constant {fps} fps, the rate its codec declares; "
           "if its frame rate varies, its times are wrong")


def _raw(path: Path, timestamps: list[float] | None = None, fps: float = 2.0) -> Path:
    return make_test_video(path, len(VFR_TIMES), fps, width=96, height=64, timestamps=timestamps,
                           preset="ultrafast", container="h264")


def test_a_variable_rate_raw_stream_is_stored_with_its_assumed_timing_said_once(tmp_path: Path) -> None:
    cam = _raw(tmp_path / "raw" / "cam.h264", timestamps=VFR_TIMES)
    timed = make_test_video(tmp_path / "raw" / "timed.mp4", 10, fps=2.0, width=96, height=64, preset="ultrafast")
    store = tmp_path / "store"
    args = ["videos", "normalize", str(cam), str(timed), "--store", str(store), "--no-progress"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {cam}: {ASSUMED.format(fps=1000)}"]
    rows = [json.loads(line) for line in (store / "index.jsonl").read_text().splitlines()]
    meta = {Path(r["source"]).name: read_meta(store, r["content_hash"]) for r in rows}
    assert meta["cam.h264"].source["timing"] == ASSUMED.format(fps=1000)
    assert meta["cam.h264"].source["fps"] == 1000.0  # the tick: 6 s of frames held as 10 ms
    assert "timing" not in meta["timed.mp4"].source

    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "2 skipped" in again.stdout
    assert "warning:" not in again.stderr


def test_a_constant_rate_raw_stream_is_timed_alike_and_says_so(tmp_path: Path) -> None:
    # x264 flags this stream as it flags the variable-rate one (fixed_frame_rate_flag 0): its tick is
    # its frame time only because its encoder's time base was 1/10 s
    _, facts = transcode(_raw(tmp_path / "cfr.h264", fps=10), tmp_path / "out.mp4")
    assert (facts["fps"], facts["timing"]) == (10.0, ASSUMED.format(fps=10))


def test_a_stream_without_rate_is_said_to_be_spread_over_its_declared_duration() -> None:
    assert assumed_timing(None, "", 8.0) == ("its frames carry no timestamps: timed evenly over the 8 s its file "
                                             "declares; if its frame rate varies, its times are wrong")
