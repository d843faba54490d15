"""`benchcheck init --example DIR`: the sample a user copies or edits in place."""

from __future__ import annotations

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
