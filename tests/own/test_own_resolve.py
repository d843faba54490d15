"""The one video resolver: every form an item may name its video by reaches the same stored video."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from own_helpers import bc, item, make_clips, write_items

from benchcheck.items import load_items
from benchcheck.video.index import read_index
from benchcheck.video.link import write_linked
from benchcheck.video.resolve import needs_resolving, resolve_items
from benchcheck.video.store import normalize_videos


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """raw/clip0..2.mp4 normalized into store/; file name -> video_id."""
    root = tmp_path_factory.mktemp("own")
    make_clips(root / "raw")
    normalize_videos([root / "raw"], root / "store")
    index = read_index(root / "store" / "index.jsonl")
    return root, root / "store", {k.split("::")[-1]: v for k, v in index.items()}


def test_every_form_reaches_the_same_video(world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, ids = world
    rows = [item(0, "clip0.mp4"), item(1, str(root / "raw" / "clip0.mp4")), item(2, "local::raw::clip0.mp4"),
            {**item(3, None), "video_id": ids["clip0.mp4"]}, item(4, "./clip0.mp4")]
    loaded = load_items([write_items(tmp_path / "b.jsonl", rows)])
    assert not loaded.errors and needs_resolving(loaded.items)
    with_dir = resolve_items(loaded.items, store, root / "raw")
    without_dir = resolve_items(loaded.items, store)  # relative paths found below a local:: key
    for res in (with_dir, without_dir):
        assert [r.status for r in res.resolutions] == ["stored"] * 5, [r.reason for r in res.resolutions]
        assert {i.video_id for i in res.items} == {ids["clip0.mp4"]}
    assert with_dir.items[0].meta["video_key"] == "clip0.mp4"  # what it named stays (exports use it)


def test_a_path_out_of_the_videos_folder_is_that_items_one_line_error(
        world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, _ = world
    (root / "secret.mp4").write_bytes((root / "raw" / "clip1.mp4").read_bytes())
    link = root / "raw" / "link.mp4"
    if not link.exists():
        os.symlink(root / "secret.mp4", link)
    rows = [item(0, "../secret.mp4"), item(1, "link.mp4"), item(2, "clip1.mp4")]
    loaded = load_items([write_items(tmp_path / "b.jsonl", rows)])
    res = resolve_items(loaded.items, store, root / "raw")
    assert [r.status for r in res.resolutions] == ["refused", "refused", "stored"]
    assert "leaves the videos folder" in res.resolutions[0].line() and "q0" in res.resolutions[0].line()
    assert "resolves outside the videos folder" in res.resolutions[1].reason
    assert res.items[0].video_id and res.items[0].video_id.startswith("k:")  # untouched: no frames
    no_dir = resolve_items(loaded.items[:1], store)
    assert no_dir.resolutions[0].status == "refused"


def test_not_found_and_not_normalized_are_named(world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, _ = world
    extra = tmp_path / "more"
    shutil.copytree(root / "raw", extra)
    make_clips(tmp_path / "other", 4)
    shutil.copy(tmp_path / "other" / "clip3.mp4", extra / "new.mp4")
    rows = [item(0, "nosuch.mp4"), item(1, "new.mp4"), item(2, None), item(3, "https://x.org/a.mp4")]
    loaded = load_items([write_items(tmp_path / "b.jsonl", rows)])
    res = resolve_items(loaded.items, store, extra)
    assert [r.status for r in res.resolutions] == ["not_found", "not_normalized", "none", "not_found"]
    assert "no such video file" in res.resolutions[0].reason and "nosuch.mp4" in res.resolutions[0].reason
    assert "videos normalize" in res.resolutions[1].reason
    assert "URL" in res.resolutions[3].reason
    assert res.summary() == ("videos: 0 items with a video found, 1 not normalized yet, 2 not found, "
                             "1 name no video")


def test_a_file_changed_since_normalizing_is_found_by_its_bytes(
        world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, ids = world
    moved = tmp_path / "raw"  # same folder name: the index key local::raw::clip0.mp4 matches
    moved.mkdir()
    shutil.copy(root / "raw" / "clip2.mp4", moved / "clip0.mp4")  # clip0's name, clip2's bytes
    loaded = load_items([write_items(tmp_path / "b.jsonl", [item(0, "clip0.mp4")])])
    res = resolve_items(loaded.items, store, moved)
    assert res.items[0].video_id == ids["clip2.mp4"]


def test_two_folders_with_one_file_name_need_videos(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_clips(tmp_path / "a", 1)
    make_clips(tmp_path / "b" / "x", 2)
    shutil.move(tmp_path / "b" / "x" / "clip1.mp4", tmp_path / "b" / "clip0.mp4")
    normalize_videos([tmp_path / "a", tmp_path / "b"], store)
    loaded = load_items([write_items(tmp_path / "i.jsonl", [item(0, "clip0.mp4")])])
    amb = resolve_items(loaded.items, store)
    assert amb.resolutions[0].status == "not_found" and "give --videos" in amb.resolutions[0].reason
    assert resolve_items(loaded.items, store, tmp_path / "b").resolutions[0].status == "stored"


def test_linked_items_load_back_resolved(world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, ids = world
    rows = [item(0, "clip0.mp4", task="t"), item(1, "nosuch.mp4"), item(2, None)]
    loaded = load_items([write_items(tmp_path / "mine.jsonl", rows)])
    res = resolve_items(loaded.items, store, root / "raw")
    files = write_linked(res.items, tmp_path / "linked")
    assert [f.name for f in files] == ["mine.jsonl"]
    back = load_items(files)
    assert not back.errors
    assert [i.video_id for i in back.items[:1]] == [ids["clip0.mp4"]] and back.items[0].task == "t"
    assert back.items[0].meta["video_key"] == "clip0.mp4"
    assert [(i.item_id, i.question, i.options, i.answer) for i in back.items] == [
        (i.item_id, i.question, i.options, i.answer) for i in loaded.items]
    assert back.items[1].meta["video_key"] == "nosuch.mp4" and not back.items[1].has_frames_source
    assert back.items[2].video_id is None
    again = resolve_items(back.items[:1], store)  # no --videos needed any more
    assert again.resolutions[0].status == "stored"


def test_items_stats_and_link_cli(world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, ids = world
    items = write_items(tmp_path / "mine.jsonl", [item(0, "clip0.mp4"), item(1, "clip1.mp4"),
                                                  item(2, "nosuch.mp4"), item(3, None)])
    r = bc("items", "stats", items, "--store", store, "--videos", root / "raw")
    assert r.exit_code == 0, r.output
    assert "mine: 4 items, 2 with a video found, 0 not normalized yet, 1 not found, 1 without a video" in r.stdout
    assert "not found: q2: no such video file" in r.stdout
    r = bc("items", "stats", items)  # no store: the files cannot be said normalized
    assert "0 with a video found, 3 not normalized yet" in r.stdout
    # --videos without a store (checking a folder before normalizing it): the files there are not normalized
    # yet, the missing one is not found; none is "found", nothing says a store holds it
    r = bc("items", "stats", items, "--videos", root / "raw")
    assert "mine: 4 items, 0 with a video found, 2 not normalized yet, 1 not found, 1 without a video" in r.stdout
    r = bc("items", "link", items, "--store", store, "--videos", root / "raw", "--out", tmp_path / "linked")
    assert r.exit_code == 0, r.output
    assert "no video: " in r.stderr and "q2: no such video file" in r.stderr
    linked = load_items([tmp_path / "linked" / "mine.jsonl"]).items
    assert [i.video_id for i in linked[:2]] == [ids["clip0.mp4"], ids["clip1.mp4"]]
    none = write_items(tmp_path / "none.jsonl", [item(0, "nosuch.mp4")])
    r = bc("items", "link", none, "--store", store, "--out", tmp_path / "l2")
    assert r.exit_code == 2 and "no item reaches a video" in r.stderr


def test_a_bare_id_names_its_one_video_file(world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    root, store, ids = world
    loaded = load_items([write_items(tmp_path / "b.jsonl", [item(0, "clip1"), item(1, "clip9")])])
    res = resolve_items(loaded.items, store, root / "raw")
    assert res.items[0].video_id == ids["clip1.mp4"] and res.resolutions[1].status == "not_found"
    assert resolve_items(loaded.items[:1], store).items[0].video_id == ids["clip1.mp4"]


def test_an_absolute_path_is_read_only_inside_the_videos_folder(
        world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    # An item file names files by absolute path: inside --videos DIR they resolve as before (by
    # the index, or by their bytes); outside it, refused for that item; without DIR, matched in
    # the store's index by path only, the file never read (a copy nobody normalized stays unknown).
    root, store, ids = world
    outside = tmp_path / "elsewhere" / "copy.mp4"
    outside.parent.mkdir()
    outside.write_bytes((root / "raw" / "clip2.mp4").read_bytes())
    rows = [item(0, str(root / "raw" / "clip2.mp4")), item(1, str(outside))]
    loaded = load_items([write_items(tmp_path / "b.jsonl", rows)])
    with_dir = resolve_items(loaded.items, store, root / "raw")
    assert [r.status for r in with_dir.resolutions] == ["stored", "refused"]
    assert "outside the videos folder" in with_dir.resolutions[1].reason and "q1" in with_dir.resolutions[1].line()
    without_dir = resolve_items(loaded.items, store)
    assert [r.status for r in without_dir.resolutions] == ["stored", "not_normalized"]  # its bytes not hashed
    assert without_dir.items[0].video_id == ids["clip2.mp4"] and without_dir.items[1].video_id != ids["clip2.mp4"]
    # Its own folder given as DIR, the same copy is read and found by its bytes.
    assert resolve_items(loaded.items[1:], store, outside.parent).items[0].video_id == ids["clip2.mp4"]


def test_an_absolute_path_without_a_videos_folder_or_a_store_is_not_found_and_says_why(
        world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    # Its bytes are not read without --videos, and no index holds it: the item has no video, so
    # it must not count as found and it gets its "no video:" line.
    root, _, _ = world
    loaded = load_items([write_items(tmp_path / "b.jsonl", [item(0, str(root / "raw" / "clip0.mp4"))])])
    res = resolve_items(loaded.items)
    assert res.resolutions[0].video_id is None and not res.resolutions[0].found
    assert [r.item.item_id for r in res.unresolved] == [res.items[0].item_id]
    assert "give --store, or --videos DIR" in res.resolutions[0].reason
    assert res.summary().startswith("videos: 0 items with a video found, 1 not normalized yet")


def test_a_symlink_loop_is_that_items_one_line(tmp_path: Path) -> None:
    # Path.resolve raises on a loop (RuntimeError before Python 3.13): it stopped the whole run.
    (tmp_path / "raw").mkdir()
    loop = tmp_path / "raw" / "loop.mp4"
    os.symlink(loop, loop)
    loaded = load_items([write_items(tmp_path / "b.jsonl", [item(0, "loop.mp4"), item(1, str(loop))])])
    res = resolve_items(loaded.items, None, tmp_path / "raw")
    assert [r.status for r in res.resolutions] == ["refused", "refused"]
    assert all("cannot be resolved" in r.reason for r in res.resolutions)


def test_a_bare_id_whose_file_is_a_symlink_out_of_the_videos_folder_is_refused(
        world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    # "evil" names evil.mp4 as "evil.mp4" would; that file is a symlink leaving DIR, so the item is
    # refused as "evil.mp4" is, and the file outside is never read (hashed) nor given a video_id.
    root, store, ids = world
    (tmp_path / "outside.mp4").write_bytes((root / "raw" / "clip2.mp4").read_bytes())
    (tmp_path / "videos").mkdir()
    os.symlink(tmp_path / "outside.mp4", tmp_path / "videos" / "evil.mp4")
    loaded = load_items([write_items(tmp_path / "b.jsonl", [item(0, "evil"), item(1, "evil.mp4")])])
    for st in (store, None):
        res = resolve_items(loaded.items, st, tmp_path / "videos")
        assert [r.status for r in res.resolutions] == ["refused", "refused"], [r.reason for r in res.resolutions]
        assert "resolves outside the videos folder" in res.resolutions[0].reason
        assert ids["clip2.mp4"] not in {i.video_id for i in res.items}


def test_a_dotdot_path_that_stays_inside_says_how_to_write_it_not_that_it_leaves(
        world: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    # 'cams/../clip1.mp4' names a clip inside the folder: refused (paths are matched as written),
    # but "leaves the videos folder" sent the user looking for a folder outside it.
    root, store, _ = world
    rows = [item(0, "cams/../clip1.mp4"), item(1, "../clip1.mp4"), item(2, "cams/../../clip1.mp4")]
    loaded = load_items([write_items(tmp_path / "b.jsonl", rows)])
    for videos in (root / "raw", None):
        res = resolve_items(loaded.items, store, videos)
        assert [r.status for r in res.resolutions] == ["refused"] * 3
        reasons = [r.reason for r in res.resolutions]
        assert "'cams/../clip1.mp4' has a '..' part, which item paths may not: write it as 'clip1.mp4'" in reasons[0]
        assert "leaves the videos folder" in reasons[1] and "leaves the videos folder" in reasons[2]
