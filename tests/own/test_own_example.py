"""`benchcheck init --example DIR`: the sample a user copies or edits in place."""

from __future__ import annotations

import shlex
from pathlib import Path

from own_helpers import bc


def test_a_second_example_into_the_same_folder_keeps_the_users_edits(tmp_path: Path) -> None:
    # The README has the user write the example, then edit mine/mybench.jsonl; running the
    # example command again replaced the edited file with the sample, silently, exit 0.
    first = bc("init", "--example", tmp_path / "mine")
    assert first.exit_code == 0, first.output
    items = tmp_path / "mine" / "mybench.jsonl"
    clip = tmp_path / "mine" / "videos" / "clip0.mp4"
    sample, clip_bytes = items.read_bytes(), clip.read_bytes()
    again = bc("init", "--example", tmp_path / "mine")  # the example's own files: a no-op
    assert again.exit_code == 0, again.output
    assert items.read_bytes() == sample and clip.read_bytes() == clip_bytes
    edited = sample + b'{"item_id": "mine_1", "question": "Mine?", "options": ["a", "b"], "answer": 0}\n'
    items.write_bytes(edited)
    clip.write_bytes(b"my own clip")
    r = bc("init", "--example", tmp_path / "mine")
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: {items} exists and is not the example's (edited?): it is kept; "
                                "give --example another folder")
    assert items.read_bytes() == edited and clip.read_bytes() == b"my own clip"


def test_the_screen_loop_init_prints_names_why_a_clip_has_no_video(tmp_path: Path) -> None:
    # Without --store in the printed loop, an item whose clip failed to normalize was told to
    # "give --videos DIR or --store" and counted as not normalized yet, not as failed.
    assert bc("init", "--example", tmp_path / "mine").exit_code == 0
    (tmp_path / "mine" / "videos" / "bad.mp4").write_bytes(b"not a video" * 100)
    items = tmp_path / "mine" / "mybench.jsonl"
    items.write_text(items.read_text() + '{"item_id": "bad_1", "question": "Which?", "options": ["a", "b"], '
                     '"answer": 0, "video": "bad.mp4"}\n')
    proj = tmp_path / "proj"
    r = bc("init", "--videos", tmp_path / "mine" / "videos", "--items", items, "--out", proj, "--no-progress")
    assert r.exit_code == 1  # one clip failed to normalize
    loop = next(line for line in r.stdout.replace("\\\n", "").splitlines() if "benchcheck screen" in line)
    argv = shlex.split(loop.split("do benchcheck ", 1)[1].split(";", 1)[0].replace("$P", str(proj)))
    argv = [a for a in argv if a != "$E"]
    for step in ("1", "2"):
        r = bc(*[step if a == "$s" else a for a in argv], "--engine", "reference", "--no-progress")
        assert r.exit_code == 0, r.output
    assert "bad_1: video 'bad.mp4' could not be normalized: not a readable video" in r.stderr
    assert "1 not normalized yet" not in r.stderr
