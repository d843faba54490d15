"""Two source folders of the same name give their clips the same keys: the second folder's clip
was dropped without a word (the run said every source was handled and exited 0). It is told
apart from the same file given twice, which is still dropped quietly."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.index import FAILURES_FILE, done_rows
from benchcheck.video.synth import make_test_video


def test_same_named_folders_say_which_clip_was_left_out(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "clips", tmp_path / "b" / "clips"
    make_test_video(a / "x.mp4", 4, fps=2.0, width=64, height=36)
    make_test_video(b / "x.mp4", 6, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(a), str(b), "--store", str(store), "--no-progress"])
    assert res.exit_code == 1, res.output
    assert "1 normalized" in res.output and "1 failed" in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("failed: "))
    assert line.startswith(f"failed: {b / 'x.mp4'}: ") and str(a / "x.mp4") in line
    assert {k: r["source"] for k, r in done_rows(store / "index.jsonl").items()} == {
        "local::clips::x.mp4": str(a / "x.mp4")}
    # no failures.jsonl row: that file is keyed by the key, which the kept file holds (docs/video.md
    # says so: tests/docs/test_video_page_key_clash.py)
    failures = store / FAILURES_FILE
    assert not failures.exists() or failures.read_text() == ""
    # the same file named twice (its folder and itself) is one source, not a clash
    again = CliRunner().invoke(main, ["videos", "normalize", str(a), str(a / "x.mp4"), "--store", str(store),
                                      "--no-progress"])
    assert again.exit_code == 0, again.output
    assert "1 skipped" in again.output and "0 failed" in again.output


def test_a_key_an_earlier_run_stored_for_another_file_fails_and_keeps_its_entry(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "clips", tmp_path / "b" / "clips"
    make_test_video(a / "x.mp4", 4, fps=2.0, width=64, height=36)
    make_test_video(b / "x.mp4", 6, fps=2.0, width=64, height=36)
    store = tmp_path / "store"

    def run(*sources: Path) -> tuple[int, str]:
        res = CliRunner().invoke(main, ["videos", "normalize", *map(str, sources), "--store", str(store),
                                        "--no-progress"])
        return res.exit_code, res.output

    code, out = run(a)
    assert code == 0 and "1 normalized" in out, out
    index = (store / "index.jsonl").read_bytes()
    first = done_rows(store / "index.jsonl")["local::clips::x.mp4"]
    for _ in range(2):  # said again on a rerun; the store is never changed by it
        code, out = run(b)
        assert code == 1 and "0 normalized" in out and "1 failed" in out, out
        [line] = [x for x in out.splitlines() if x.startswith("failed: ")]
        assert line.startswith(f"failed: {b / 'x.mp4'}: ") and str(a / "x.mp4") in line
        assert (store / "index.jsonl").read_bytes() == index
        assert sorted(p.name for p in (store / "normalized").iterdir()) == [first["content_hash"]]
    # the first file again is skipped, as before
    code, out = run(a)
    assert code == 0 and "1 skipped" in out, out


def test_the_same_source_replaced_or_moved_is_no_clash(tmp_path: Path) -> None:
    a = tmp_path / "a" / "clips"
    make_test_video(a / "x.mp4", 4, fps=2.0, width=64, height=36)
    store = tmp_path / "store"
    args = ["--store", str(store), "--no-progress"]
    assert CliRunner().invoke(main, ["videos", "normalize", str(a), *args]).exit_code == 0
    # replaced at its path: stored again under its key
    make_test_video(a / "x.mp4", 6, fps=2.0, width=64, height=36)
    res = CliRunner().invoke(main, ["videos", "normalize", str(a), *args])
    assert res.exit_code == 0 and "1 normalized" in res.output, res.output
    # the same bytes under another path of the same key (a copy of the folder): the same video
    b = tmp_path / "b" / "clips"
    b.mkdir(parents=True)
    (b / "x.mp4").write_bytes((a / "x.mp4").read_bytes())
    res = CliRunner().invoke(main, ["videos", "normalize", str(b), *args])
    assert res.exit_code == 0 and "1 already stored" in res.output, res.output
    assert done_rows(store / "index.jsonl")["local::clips::x.mp4"]["source"] == str(b / "x.mp4")
