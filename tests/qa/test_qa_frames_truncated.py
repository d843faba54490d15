"""The samplers of raw clips (``qa``'s endpoint frames, ``serve``'s video parts) hold a clip to
normalize's truncation rule. A cut AVI declares its frame count in its header, but the samplers
took no notice: the time-uniform grid was laid over the part that is there, so an item was asked
about frames of other times than its clip's (the first half, spread as if whole), without a
word. Such a clip is now the item's error, one line naming it, kept apart from the scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from qa_servers import CLIP_FRAMES, RecordingHost, completion, qa_entry, read_json, run_cli

from benchcheck.qa.frames import sample_jpegs
from benchcheck.serve.media import decode_frames
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import make_test_video, read_frame_index
from loopback import thread_server

N, FPS = 40, 10  # 4.0 s


def _cut_avi(src: Path, dest: Path, keep: float = 0.7) -> Path:
    data = src.read_bytes()
    dest.write_bytes(data[:int(len(data) * keep)])
    return dest


@pytest.fixture(scope="module")
def avi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # textured: frames of real size, so a cut keeps whole frames past the first keyframe
    return make_test_video(tmp_path_factory.mktemp("avi") / "whole.avi", N, fps=FPS, width=160, height=96,
                           bframes=0, textured=True, container="avi")


def test_the_whole_avi_is_sampled_over_all_its_frames(avi: Path) -> None:
    assert [read_frame_index(j) for j in sample_jpegs(avi, 8)] == uniform_grid([i / FPS for i in range(N)], 8)


def test_a_cut_avi_is_an_error_naming_the_clip_not_frames_of_its_first_part(tmp_path: Path, avi: Path) -> None:
    cut = _cut_avi(avi, tmp_path / "cut.avi")
    with pytest.raises(ValueError, match=r"^cut\.avi: truncated: frames end at \d\.\d s of the 4\.0 s declared$"):
        sample_jpegs(cut, 8)


def test_a_served_cut_avi_is_refused_in_one_line(tmp_path: Path, avi: Path) -> None:
    data = _cut_avi(avi, tmp_path / "cut.avi").read_bytes()
    with pytest.raises(ValueError, match=r"^truncated: frames end at \d\.\d s of the 4\.0 s declared$"):
        decode_frames(data, 8)
    assert len(decode_frames(avi.read_bytes(), 8)) == 8


def test_qa_run_keeps_the_cut_clip_an_errored_item(tmp_path: Path, avi: Path) -> None:
    videos = tmp_path / "videos"
    make_test_video(videos / "a.mp4", n_frames=CLIP_FRAMES, fps=4.0, width=320, height=180)
    _cut_avi(avi, videos / "cut.avi")
    dataset = tmp_path / "dataset.json"
    entries = [qa_entry("a", "Is there a car?"), qa_entry("c", "Is there a car?", video="cut.avi")]
    dataset.write_text(json.dumps(entries))

    def reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, completion("cosmos-reason-served", "yes")

    host = RecordingHost("cosmos", reply)
    out = tmp_path / "out"
    with thread_server(host.app()) as url:
        res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(videos), "--output-dir", str(out),
                       "--vlm-endpoint", url, "--vlm-model", "cosmos", "--skip-judge", "--num-frames", "4",
                       "--max-side", "64"], {})
    assert res.returncode == 3, res.stderr  # items that errored
    summary = read_json(out / "summary.json")
    assert len(host.chats()) == 1  # only the whole clip was asked about
    [error] = summary["errors"]
    assert error["id"] == "c"
    assert error["error"].startswith("vlm: cut.avi: truncated: frames end at ")
    assert "\n" not in error["error"]
    assert summary["vlm_errors_by_kind"] == {"video": 1}
    # answered without a judge: the whole clip's item is unjudged, the cut one's an error, none scored
    assert (summary["counts"]["errors"], summary["counts"]["unjudged"], summary["counts"]["scored"]) == (1, 1, 0)
