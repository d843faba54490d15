"""An item whose video path is a file name that is not UTF-8 (``json.dumps(os.listdir())``
writes ``"caf\\udce9.mp4"``) reaches that file, as ``videos normalize`` stores it: the loader
rejected the item with a raw "UnicodeEncodeError ..." line, and ``items link`` crashed writing it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.items.load import load_items
from benchcheck.video.store import normalize_videos
from benchcheck.video.synth import make_test_video


def _item(k: int, video: str) -> str:
    return json.dumps({"item_id": f"q{k}", "question": "What moves?", "options": ["a", "b"], "answer": 0,
                       "video": video}) + "\n"


def test_non_utf8_video_name_resolves_to_the_file(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    made = make_test_video(tmp_path / "clip.mp4", 4, fps=2.0, width=64, height=36)
    videos.mkdir()
    try:
        os.rename(os.fsencode(made), os.path.join(os.fsencode(videos), b"caf\xe9.mp4"))
    except OSError:
        pytest.skip("this file system refuses a name that is not UTF-8")
    (name,) = os.listdir(videos)
    assert name == "caf\udce9.mp4"
    store = tmp_path / "store"
    normalize_videos([videos], store)
    items = tmp_path / "bench.jsonl"
    items.write_text(_item(0, name) + _item(1, "caf\udce8.mp4") + _item(2, "\ud83d.mp4"))

    loaded = load_items([items])
    assert [p.message for p in loaded.problems] == []
    assert [i.item_id for i in loaded.items] == ["q0", "q1", "q2"]

    res = CliRunner().invoke(main, ["items", "stats", str(items), "--store", str(store), "--videos", str(videos)])
    assert res.exit_code == 0, res.output
    assert "1 with a video found" in res.output and "2 not found" in res.output
    assert "Error" not in res.output and "lone surrogate" in res.output

    out = tmp_path / "linked"
    res = CliRunner().invoke(main, ["items", "link", str(items), "--store", str(store), "--videos", str(videos),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    relinked = load_items([out / "bench.jsonl"])
    assert relinked.problems == []
    by_id = {i.item_id: i for i in relinked.items}
    assert by_id["q0"].video_id is not None and not by_id["q0"].video_id.startswith("k:")
    assert by_id["q0"].meta["video_key"] == name
