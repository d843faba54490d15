"""An MPEG program stream cut exactly between two of its packets (at a multiple of 2,048 bytes, such
as a whole number of MiB) fails as truncated, as a cut mp4 or mkv does. Its every unit is whole, so
the byte walk of ``cut_end`` read it as whole, and a program stream declares no duration to check
its frames against: it was stored as the shorter video, without a word. The cut splits the last
frame's data, which the decoder conceals."""

from __future__ import annotations

from pathlib import Path

import av
import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.cut_end import cut_end
from benchcheck.video.index import FAILURES_FILE, done_rows, last_failures
from benchcheck.video.normalize import NormalizeError, transcode
from benchcheck.video.synth import make_test_video

PACKET = 2048  # the size of the packets FFmpeg's program-stream muxers write
N = 40
CLIP = {"fps": 2.0, "textured": True, "container": "mpeg"}


# B-frames (the encoder's default) or none: with them, a packet of the file that starts two frames
# stamps the first only, and the others are timed between (test_audit_videos_ps_frames_without_pts)
@pytest.fixture(scope="module", params=[None, 0], ids=["bframes", "no_bframes"])
def whole(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return make_test_video(tmp_path_factory.mktemp("ps") / "whole.mpg", N, bframes=request.param,
                           **CLIP)  # type: ignore[arg-type]


def _cut(whole: Path, dest: Path, share: float) -> Path:
    data = whole.read_bytes()
    dest.write_bytes(data[:int(len(data) * share) // PACKET * PACKET])
    return dest


@pytest.mark.parametrize("threads", [1, 4])
def test_the_whole_program_stream_is_stored_whole(tmp_path: Path, whole: Path, threads: int) -> None:
    with av.open(str(whole)) as c:
        assert c.format.name == "mpeg"
    _, facts = transcode(whole, tmp_path / "o.mp4", threads)
    assert facts["n_frames"] == N


# threads: the decoder flags the cut frame only without slice threads; the outcome is the same
# whatever --workers leaves each source
@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("share", [0.05, 1 / 3, 0.5, 0.9])
def test_a_program_stream_cut_between_packets_fails_as_truncated(tmp_path: Path, whole: Path,
                                                                share: float, threads: int) -> None:
    cut = _cut(whole, tmp_path / "cut.mpg", share)
    assert cut_end("mpeg", cut) is None  # every unit is whole: the byte walk cannot tell
    with pytest.raises(NormalizeError, match=r"^truncated: the MPEG-PS file ends inside its last frame"):
        transcode(cut, tmp_path / "o.mp4", threads)


def test_the_cut_file_is_a_failure_line_and_the_whole_one_is_stored(tmp_path: Path, whole: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    cut = _cut(whole, raw / "cut.mpg", 0.5)
    (raw / "whole.mpg").write_bytes(whole.read_bytes())
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(raw), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    [line] = [x for x in res.output.splitlines() if x.startswith("failed: ")]
    assert line.startswith(f"failed: {cut}: truncated: the MPEG-PS file ends inside its last frame")
    assert set(done_rows(store / "index.jsonl")) == {f"local::{raw.name}::whole.mpg"}
    assert set(last_failures(store / FAILURES_FILE)) == {f"local::{raw.name}::cut.mpg"}
