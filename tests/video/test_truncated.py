"""Damaged Matroska sources (issue 40, items 2 and 3): a truncated MKV fails against the duration its
container declares, and a damaged video is stored or failed the same whatever the decode threads
(``--workers``); a rerun leaves ``failures.jsonl`` consistent with what is stored."""

from __future__ import annotations

import shutil
from fractions import Fraction
from pathlib import Path

import av
import pytest
from truncation_helpers import FPS, N_FRAMES, H, Silence, W, cut, make_clip, zeroed

from benchcheck.video.index import FAILURES_FILE, done_rows, last_failures
from benchcheck.video.normalize import NormalizeError, transcode
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import paint_frame
from benchcheck.video.truncation import declared_duration, frames_short


def _can_encode(codec: str) -> bool:
    try:
        av.codec.Codec(codec, "w")
    except Exception:
        return False
    return True


def make_mkv(path: Path, codec: str = "libx264", audio: bool = False) -> Path:
    """A 5 s Matroska file; ``audio``: silence running 2 s past the video's end (a longer container)."""
    options = {"libx264": {"preset": "ultrafast"}, "libsvtav1": {"preset": "12"}}.get(codec, {})
    return make_clip(path, "matroska", codec, codec_options=options,
                     audio=Silence("aac", 8000, "fltp", 1024, 7) if audio else None)


@pytest.fixture(scope="module")
def mkv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mkv(tmp_path_factory.mktemp("mkv") / "whole.mkv")


def test_mkv_declares_its_duration_at_the_container_level(mkv: Path) -> None:
    with av.open(str(mkv)) as c:
        s = c.streams.video[0]
        assert s.duration is None  # what the old check read: nothing, so no truncation was seen
        assert declared_duration(c, s) == pytest.approx(5.0)


@pytest.mark.parametrize("codec", ["libx264", "libsvtav1", "libvpx-vp9"])
def test_mkv_cut_at_half_fails_as_truncated(tmp_path: Path, codec: str) -> None:
    if not _can_encode(codec):
        pytest.skip(f"this PyAV cannot encode {codec}")
    whole = make_mkv(tmp_path / "whole.mkv", codec)
    transcode(whole, tmp_path / "ok.mp4")  # the whole file is fine
    half = cut(whole, tmp_path / "half.mkv", 0.5)
    with pytest.raises(NormalizeError, match=r"truncated: frames end at \d\.\d s of the 5\.0 s declared"):
        transcode(half, tmp_path / "out.mp4")


def test_more_than_five_percent_missing_fails_and_less_is_kept() -> None:
    def short(n: int) -> str | None:
        return frames_short([i / FPS for i in range(n)], 1 / FPS, declared=5.0)

    assert short(48) is None  # frames end at 4.8 s of 5.0 s: 4 % missing, kept
    assert short(47) == "truncated: frames end at 4.7 s of the 5.0 s declared"  # 6 % missing
    # a last frame the file shows for 0.5 s is not 0.4 s of missing frames
    assert frames_short([i / FPS for i in range(46)], 1 / FPS, declared=5.0, last_shown=0.5) is None


def _held_end_mp4(path: Path, hold_ms: int) -> Path:
    """90 frames at 10 fps, the last one shown for ``hold_ms`` (as a screen recording ends)."""
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, 1000)
        stream.codec_context.options = {"preset": "ultrafast", "bf": "0"}
        packets = []
        for i in range(90):
            frame = av.VideoFrame.from_ndarray(paint_frame(i, W, H), format="rgb24")
            frame.pts, frame.time_base = i * 100, Fraction(1, 1000)
            packets += stream.encode(frame)
        packets += stream.encode()
        for k, packet in enumerate(packets):
            packet.duration = hold_ms if k == len(packets) - 1 else 100
            out.mux(packet)
    return path


def test_a_last_frame_held_is_not_truncation(tmp_path: Path) -> None:
    held = _held_end_mp4(tmp_path / "held.mp4", 1100)
    with av.open(str(held)) as c:
        assert declared_duration(c, c.streams.video[0]) == pytest.approx(10.0, abs=0.05)
    _, facts = transcode(held, tmp_path / "o.mp4")  # frames end at 9.0 s, the last shown to 10.0 s
    assert facts["n_frames"] == 90


def test_audio_past_the_video_is_not_truncation(tmp_path: Path) -> None:
    mkv = make_mkv(tmp_path / "av.mkv", audio=True)
    with av.open(str(mkv)) as c:
        assert c.duration / 1e6 > 5.5  # the container is longer than the video
    _, facts = transcode(mkv, tmp_path / "o.mp4")
    assert facts["n_frames"] == N_FRAMES


def test_truncated_mkv_is_a_failure_row_not_a_shorter_video(tmp_path: Path, mkv: Path) -> None:
    src = tmp_path / "raw"
    src.mkdir()
    cut(mkv, src / "clip.mkv", 0.5)
    store = tmp_path / "store"
    report = normalize_videos([src], store)
    [o] = report.outcomes
    assert o.status == "failed" and o.reason and o.reason.startswith("truncated")
    assert not done_rows(store / "index.jsonl")
    # the user replaces the file with the whole one: the rerun stores it and failures.jsonl agrees
    shutil.copy(mkv, src / "clip.mkv")
    report = normalize_videos([src], store)
    assert [o.status for o in report.outcomes] == ["done"]
    assert set(done_rows(store / "index.jsonl")) == {o.key}
    assert o.key not in last_failures(store / FAILURES_FILE)


def _offsets(data: bytes, n: int = 24) -> range:
    return range(1000, len(data) - 4096, max(1500, len(data) // n))


def _status(path: Path, out: Path, threads: int) -> str:
    try:
        _, facts = transcode(path, out, threads)
    except NormalizeError:
        return "failed"
    return f"stored {facts['n_frames']}"


def test_a_damaged_video_gets_one_result_whatever_the_threads(tmp_path: Path) -> None:
    if not _can_encode("libsvtav1"):
        pytest.skip("this PyAV cannot encode AV1")
    data = make_mkv(tmp_path / "av1.mkv", "libsvtav1").read_bytes()
    differ = []
    for offset in _offsets(data):  # 4 KiB zeroed at each place in turn
        bad = zeroed(data, offset, tmp_path / "bad.mkv")
        results = {threads: _status(bad, tmp_path / "o.mp4", threads) for threads in (1, 4)}
        if len(set(results.values())) > 1:
            differ.append((offset, results))
    assert not differ, differ


def test_normalize_same_outcomes_with_one_or_two_workers(tmp_path: Path) -> None:
    if not _can_encode("libsvtav1"):
        pytest.skip("this PyAV cannot encode AV1")
    data = make_mkv(tmp_path / "av1.mkv", "libsvtav1").read_bytes()
    src = tmp_path / "raw"
    src.mkdir()
    for offset in _offsets(data):
        zeroed(data, offset, src / f"z{offset}.mkv")
    outcomes = []
    for workers in (1, 2):
        report = normalize_videos([src], tmp_path / f"store{workers}", workers=workers)
        outcomes.append(sorted((Path(o.path).name, o.status, o.n_frames) for o in report.outcomes))
    assert outcomes[0] == outcomes[1]
