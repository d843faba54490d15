"""Every format's folder is read whole by its harness (lmms-eval's ``--include_path``, a glob over the
TSVs or the Inspect files): re-exporting fewer benchmarks into the folder of an earlier export removes
the others' files, which would be read as part of the new one, and nothing but the files the manifest of
that format and selection says an export wrote, as it wrote them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

import benchcheck.report.export as export_mod
from benchcheck.items import Item
from benchcheck.report.export import FORMATS, Cleanup, Selected, export, manifest_name
from scripted_pool import cli, screened

# Per format, the files of benchmark Two a kept export writes (Two has an item VLMEvalKit leaves out).
TWO = {"lmms-eval": ["Two_kept.jsonl", "benchcheck_two_kept.yaml"],
       "vlmevalkit": ["Two_kept.tsv", "Two_kept.left_out.jsonl"],
       "inspect": ["Two_kept.inspect.jsonl"]}
# Files another export (another format, the removed items) or the user put in the same folder.
OTHERS = ["Two_removed.jsonl", "benchcheck_two_removed.yaml", "Two_removed.tsv", "Two_removed.left_out.jsonl",
          "Two_removed.inspect.jsonl", "Two_kept.txt", "notes.jsonl", "Two.tsv", "_benchcheck_removed.yaml"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("stale_export")
    benches = {name: [{"item_id": f"{name}_{i}", "question": f"Plain {name} {i}?", "options": ["a", "b", "c", "d"],
                       "answer": i % 4} for i in range(3)] for name in ("One", "Two")}
    # an option pandas reads as missing: VLMEvalKit's export lists the item in a left_out side file
    benches["Two"][2]["options"] = ["a", "b", "null", "d"]
    items, res, _ = screened(root, benches)
    return items, res


@pytest.mark.parametrize("fmt", sorted(TWO))
def test_reexport_of_fewer_benchmarks_drops_the_others_files(pool: tuple[Path, Path], tmp_path: Path,
                                                            fmt: str) -> None:
    items, res = pool
    out = tmp_path / "export"
    out.mkdir()
    for name in OTHERS:
        (out / name).write_text("not this export's")
    notes = []
    for paths in ([items], [items / "One.jsonl"]):
        r = cli("export", "--results", str(res), *[a for p in paths for a in ("--items", str(p))],
                "--format", fmt, "--out", str(out), "--chain", "1")
        assert r.returncode == 0, r.stderr
        assert all((out / name).is_file() for name in TWO[fmt]) or notes
        notes.append([line for line in r.stderr.splitlines() if line.startswith("note: removed")])
    assert not [name for name in TWO[fmt] if (out / name).exists()]
    assert all((out / name).read_text() == "not this export's" for name in OTHERS)
    assert any(p.name.startswith("One_kept") for p in out.iterdir())
    if fmt == "lmms-eval":
        group = yaml.safe_load((out / "_benchcheck_kept.yaml").read_text())
        assert group["task"] == ["benchcheck_one_kept"] and (out / "utils.py").is_file()
    files = f"{len(TWO[fmt])} file{'s' * (len(TWO[fmt]) != 1)}"
    assert notes == [[], [f"note: removed {files} an earlier export wrote for benchmarks not in "
                          f"this one: {', '.join(sorted(TWO[fmt]))}"]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_benchmark_left_empty_loses_its_hashed_task_files_too(tmp_path: Path, fmt: str) -> None:
    # Video-MME and video_mme fold to one lmms-eval task name, so each task is named with a hash: an
    # earlier export's files of the one now empty go whatever their name
    def pick(bench: str, n: int) -> list[Selected]:
        return [Selected(Item(item_id=f"{bench}{i}", bench=bench, question="Q?", options=("a", "b"), answer=0),
                         None, None) for i in range(n)]

    first = export(fmt, tmp_path, {"Video-MME": pick("Video-MME", 2), "video_mme": pick("video_mme", 2)}, False)
    second = export(fmt, tmp_path, {"Video-MME": pick("Video-MME", 2), "video_mme": []}, False)
    gone = set(first) - set(second)
    assert gone and not [p.name for p in gone if p.exists()] and all(p.is_file() for p in second)


@pytest.mark.parametrize("label", ["kept", "removed"])
def test_each_pattern_matches_only_its_own_formats_files(tmp_path: Path, label: str) -> None:
    # the formats (and a kept and a removed export) share a folder: the note on a folder with no manifest
    # names no file another format writes, and every per-benchmark file of its own format
    from benchcheck.report.export import UNRECORDED_PATTERNS as BENCH_PATTERNS

    benches = ["A", "a_kept", "B.inspect", "C_removed.left_out", "Video-MME", "video_mme", "x y"]
    rows = {b: [Selected(Item(item_id=f"{b}0", bench=b, question="null", options=("a", "b"), answer=0), None, None)]
            for b in benches}
    written: dict[tuple[str, str], set[str]] = {}
    for fmt in FORMATS:
        for lab in ("kept", "removed"):
            out = tmp_path / f"{fmt}-{lab}"
            written[fmt, lab] = {p.relative_to(out).as_posix() for p in export(fmt, out, rows, lab == "removed")}
    shared = {"utils.py", "README.md", "_benchcheck_kept.yaml", "_benchcheck_removed.yaml"}
    for fmt in FORMATS:
        own = tmp_path / f"{fmt}-{label}"
        mine = {p.relative_to(own).as_posix() for pat in BENCH_PATTERNS[fmt] for p in own.glob(pat.format(label=label))}
        assert mine == written[fmt, label] - shared
        for other, lab in written:
            if other == fmt and (lab == label or fmt == "parquet"):
                continue
            folder = tmp_path / f"{other}-{lab}"
            hit = [p.name for pat in BENCH_PATTERNS[fmt] for p in folder.glob(pat.format(label=label))]
            assert not hit, (fmt, label, other, lab)


# Files of the user's own that the old glob patterns took for an export's files (the reviewer's report).
USER = {"lmms-eval": ["my_kept.jsonl", "benchcheck_custom_kept.yaml"],
        "vlmevalkit": ["results_kept.tsv", "mine_kept.left_out.jsonl"],
        "inspect": ["my_kept.inspect.jsonl"],
        "parquet": ["data/mine/test-00000-of-00001.parquet"]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_never_removes_a_users_file_named_like_its_own(pool: tuple[Path, Path], tmp_path: Path,
                                                              fmt: str) -> None:
    items, res = pool
    out = tmp_path / "export"
    for name in USER[fmt]:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("the user's")
    removed = []
    for paths in ([items], [items / "One.jsonl"]):
        r = cli("export", "--results", str(res), *[a for p in paths for a in ("--items", str(p))],
                "--format", fmt, "--out", str(out), "--chain", "1")
        assert r.returncode == 0, r.stderr
        removed.append([line for line in r.stderr.splitlines() if line.startswith("note: removed")])
    assert all((out / name).read_text() == "the user's" for name in USER[fmt])
    assert not any("my_" in line or "mine" in line or "custom" in line or "results_" in line
                   for lines in removed for line in lines)


def pick(benches: Mapping[str, int]) -> dict[str, list[Selected]]:
    """``n`` items of each benchmark, one of them an item VLMEvalKit leaves out (a side file too)."""
    return {b: [Selected(Item(item_id=f"{b}{i}", bench=b, question="null" if i == 0 else f"Q {b} {i}?",
                              options=("a", "b"), answer=0), None, None) for i in range(n)]
            for b, n in benches.items()}


def manifest(out: Path, fmt: str, label: str = "kept") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / manifest_name(fmt, label)).read_text())
    return doc


def snapshot(out: Path) -> dict[str, bytes]:
    """The folder's files, but the lease file an export holds it by (its holder changes with each)."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and ".leases" not in p.parts}


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_manifest_names_the_files_written_and_is_written_last(tmp_path: Path, fmt: str) -> None:
    paths = export(fmt, tmp_path, pick({"A": 2, "B": 2}), False)
    doc = manifest(tmp_path, fmt)
    assert doc["complete"] and "earlier" not in doc
    assert sorted(doc["files"]) == sorted(p.relative_to(tmp_path).as_posix() for p in paths)
    assert all(doc["files"][p.relative_to(tmp_path).as_posix()]["size"] == p.stat().st_size for p in paths)
    # the manifest is hidden and no item file: harnesses and --items FOLDER read neither
    assert manifest_name(fmt, "kept").startswith(".") and not manifest_name(fmt, "kept").endswith(
        (".json", ".jsonl", ".yaml", ".tsv", ".parquet", ".csv"))


def test_exports_sharing_a_folder_never_touch_each_others_files(tmp_path: Path) -> None:
    # every format, kept and removed (Parquet's two are one dataset), in one folder: re-exporting one with
    # fewer benchmarks removes its own files of the others and leaves every other export's as it was
    runs = [(fmt, removed) for fmt in FORMATS for removed in (False, True) if fmt != "parquet" or not removed]
    for fmt, removed in runs:
        export(fmt, tmp_path, pick({"A": 2, "B": 2}), removed)
    for fmt, removed in runs:
        label = "removed" if removed else "kept"
        before = snapshot(tmp_path)
        mine = set(manifest(tmp_path, fmt, label)["files"])
        cleanup = Cleanup()
        now = {p.relative_to(tmp_path).as_posix() for p in export(fmt, tmp_path, pick({"A": 2}), removed, cleanup)}
        after = snapshot(tmp_path)
        gone = set(before) - set(after)
        assert gone == mine - now and gone and not cleanup.changed and not cleanup.unrecorded, (fmt, label)
        assert {p.relative_to(tmp_path).as_posix() for p in cleanup.removed} == gone
        assert {rel for rel in after if after[rel] != before.get(rel)} <= now | {manifest_name(fmt, label)}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_replaced_since_the_export_is_left_and_said(tmp_path: Path, fmt: str) -> None:
    first = export(fmt, tmp_path, pick({"A": 2, "B": 2}), False)
    replaced = next(p for p in first if "B" in p.relative_to(tmp_path).as_posix())
    replaced.write_bytes(b"the user's own now")
    cleanup = Cleanup()
    export(fmt, tmp_path, pick({"A": 2}), False, cleanup)
    assert replaced.read_bytes() == b"the user's own now" and cleanup.changed == [replaced]
    assert replaced not in cleanup.removed
    # not the export's any more: the manifest no longer claims it, so no later run touches it
    assert replaced.relative_to(tmp_path).as_posix() not in manifest(tmp_path, fmt)["files"]


@pytest.mark.parametrize("fmt", sorted(TWO))
def test_a_folder_an_export_before_manifests_wrote_loses_nothing(pool: tuple[Path, Path], tmp_path: Path,
                                                                 fmt: str) -> None:
    # an older benchcheck kept no manifest: which of the files named like the export's it wrote is unknown
    # (the user's own share the names), so nothing is removed and one note names them and what to do
    items, res = pool
    out = tmp_path / "export"
    args = ("--results", str(res), "--format", fmt, "--out", str(out), "--chain", "1")
    assert cli("export", "--items", str(items), *args).returncode == 0
    (out / manifest_name(fmt, "kept")).unlink()
    for name in USER[fmt]:
        (out / name).write_text("the user's")
    before = snapshot(out)
    r = cli("export", "--items", str(items / "One.jsonl"), *args)
    assert r.returncode == 0, r.stderr
    assert all(snapshot(out).get(rel) == before[rel] for rel in [*TWO[fmt], *USER[fmt]])
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: no record")]
    assert not [line for line in r.stderr.splitlines() if line.startswith("note: removed")]
    assert len(notes) == 1 and all(name in notes[0] for name in [*TWO[fmt], *USER[fmt]])
    assert "One_kept" not in notes[0] and "delete those an earlier export wrote" in notes[0]
    assert f"there was no {manifest_name(fmt, 'kept')}" in notes[0]
    # the manifest there now records none of them: every later export names them again (as after an
    # unreadable manifest), removes none, and stops once they are gone
    for _ in range(2):
        r = cli("export", "--items", str(items / "One.jsonl"), *args)
        again = [line for line in r.stderr.splitlines() if line.startswith("note: no record")]
        assert r.returncode == 0 and "note: removed" not in r.stderr, r.stderr
        assert len(again) == 1 and all(name in again[0] for name in [*TWO[fmt], *USER[fmt]]), r.stderr
        assert f"when an export first found them, there was no {manifest_name(fmt, 'kept')}" in again[0]
        assert all(snapshot(out).get(rel) == before[rel] for rel in [*TWO[fmt], *USER[fmt]])
    for name in [*TWO[fmt], *USER[fmt]]:
        (out / name).unlink()
    r = cli("export", "--items", str(items / "One.jsonl"), *args)
    assert r.returncode == 0 and "note: no record" not in r.stderr, r.stderr
    (out / USER[fmt][0]).write_text("the user's, made since")  # no export left it: never named
    r = cli("export", "--items", str(items / "One.jsonl"), *args)
    assert r.returncode == 0 and "note: no record" not in r.stderr and (out / USER[fmt][0]).is_file(), r.stderr


def test_an_unreadable_manifest_removes_nothing(tmp_path: Path) -> None:
    export("inspect", tmp_path, pick({"A": 1, "B": 1}), False)
    (tmp_path / manifest_name("inspect", "kept")).write_text('{"files": {"../../etc/passwd": 1}}')
    cleanup = Cleanup()
    export("inspect", tmp_path, pick({"A": 1}), False, cleanup)
    assert (tmp_path / "B_kept.inspect.jsonl").is_file() and not cleanup.removed
    assert cleanup.unreadable and [p.name for p in cleanup.unrecorded] == ["B_kept.inspect.jsonl"]
    assert cleanup.unrecorded_why == f"its manifest could not be read: {cleanup.unreadable}"


def test_an_unreadable_manifest_is_not_forgotten_by_the_next_export(tmp_path: Path) -> None:
    # the manifest replacing an unreadable one (another version's) carries why, so each later export
    # still names the look-alike the unread export may have left, removes none, and stops once it is gone
    export("inspect", tmp_path, pick({"A": 1, "B": 1}), False)
    doc = manifest(tmp_path, "inspect")
    (tmp_path / manifest_name("inspect", "kept")).write_text(json.dumps({**doc, "benchcheck_export": 2}))
    first = Cleanup()
    export("inspect", tmp_path, pick({"A": 1}), False, first)
    assert first.unreadable and [p.name for p in first.unrecorded] == ["B_kept.inspect.jsonl"]
    for _ in range(2):
        again = Cleanup()
        export("inspect", tmp_path, pick({"A": 1}), False, again)
        assert (tmp_path / "B_kept.inspect.jsonl").is_file() and not again.removed
        assert [p.name for p in again.unrecorded] == ["B_kept.inspect.jsonl"]
        assert again.unrecorded_why == f"when an export first found them, {first.unrecorded_why}"
        assert again.unreadable is None  # the manifest read this time
    (tmp_path / "B_kept.inspect.jsonl").unlink()
    done = Cleanup()
    export("inspect", tmp_path, pick({"A": 1}), False, done)
    assert done == Cleanup() and "unrecorded" not in manifest(tmp_path, "inspect")
    (tmp_path / "B_kept.inspect.jsonl").write_text("the user's, made since")
    later = Cleanup()
    export("inspect", tmp_path, pick({"A": 1}), False, later)
    assert later == Cleanup()


def test_an_export_cut_short_after_an_unreadable_manifest_keeps_its_reason(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    export("inspect", tmp_path, pick({"A": 1, "B": 1}), False)
    (tmp_path / manifest_name("inspect", "kept")).write_text("{")

    def remove(*_a: Any) -> None:
        raise Crash

    monkeypatch.setattr(export_mod, "remove_earlier", remove)
    with pytest.raises(Crash):
        export("inspect", tmp_path, pick({"A": 1}), False)
    monkeypatch.undo()
    cleanup = Cleanup()
    export("inspect", tmp_path, pick({"A": 1}), False, cleanup)
    assert [p.name for p in cleanup.unrecorded] == ["B_kept.inspect.jsonl"]
    assert "its manifest could not be read" in str(cleanup.unrecorded_why)


def test_the_note_of_an_unreadable_manifest_shows_on_every_later_export(pool: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    items, res = pool
    out = tmp_path / "export"
    args = ("--results", str(res), "--format", "inspect", "--out", str(out), "--chain", "1")
    assert cli("export", "--items", str(items), *args).returncode == 0
    path = out / manifest_name("inspect", "kept")
    path.write_text(json.dumps({**json.loads(path.read_text()), "benchcheck_export": 2}))
    for _ in range(2):
        r = cli("export", "--items", str(items / "One.jsonl"), *args)
        notes = [line for line in r.stderr.splitlines() if line.startswith("note: no record")]
        assert r.returncode == 0 and len(notes) == 1 and "Two_kept.inspect.jsonl" in notes[0], r.stderr
        assert "manifest could not be read" in notes[0] and "note: removed" not in r.stderr
        assert (out / "Two_kept.inspect.jsonl").is_file()


class Crash(Exception):
    pass


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("where", ["mid-write", "after-claim", "after-write", "after-removal"])
@pytest.mark.parametrize("then", [{"A": 2}, {"A": 2, "B": 2, "C": 2}, {"C": 1}])
def test_an_export_cut_short_leaves_its_files_to_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              fmt: str, where: str, then: dict[str, int]) -> None:
    # a kill between any two steps: the next export, whatever it selects, removes every file of both runs
    # before it that it does not write, and the manifest then names exactly its own
    export(fmt, tmp_path, pick({"A": 2, "B": 2}), False)
    real_stream, real_manifest = export_mod.write_streamed, export_mod.write_manifest
    n_files = []

    def stream(path: Path, write: Callable[[Any], None], claim: Callable[[Any], None]) -> None:
        n_files.append(path)
        if len(n_files) == 2 and where == "mid-write":  # a kill while the second file is streamed
            def half(f: Any) -> None:
                f.write(b"half a row")
                raise Crash
            return real_stream(path, half, claim)
        if len(n_files) == 2 and where == "after-claim":  # claimed in the manifest, not yet renamed
            def claimed(w: Any) -> None:
                claim(w)
                raise Crash
            return real_stream(path, write, claimed)
        return real_stream(path, write, claim)

    def remove(*_a: Any) -> None:
        raise Crash

    def final_manifest(*a: Any, **k: Any) -> None:
        if len(a) < 5 and "earlier" not in k:
            raise Crash
        real_manifest(*a, **k)

    monkeypatch.setattr(export_mod, "write_streamed", stream)
    if where == "after-write":
        monkeypatch.setattr(export_mod, "remove_earlier", remove)
    if where == "after-removal":
        monkeypatch.setattr(export_mod, "write_manifest", final_manifest)
    with pytest.raises(Crash):
        export(fmt, tmp_path, pick({"B": 2, "C": 2, "D": 2}), False)
    monkeypatch.undo()
    doc = manifest(tmp_path, fmt)
    for rel in {*doc["files"], *doc.get("earlier", {})}:
        # every file the manifest names is gone or as an export wrote it (one the manifest claims)
        got = (tmp_path / rel).read_bytes() if (tmp_path / rel).exists() else None
        entries = [doc["files"].get(rel), *doc.get("earlier", {}).get(rel, [])]
        assert got is None or export_mod.Written.of(got).sha256 in {e["sha256"] for e in entries if e}, rel
    (tmp_path / "mine_kept.jsonl").write_text("the user's")
    now = export(fmt, tmp_path, pick(then), False)
    left = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file() and ".leases" not in p.parts}
    assert left == {p.relative_to(tmp_path).as_posix() for p in now} | {"mine_kept.jsonl", manifest_name(fmt, "kept")}
    assert sorted(manifest(tmp_path, fmt)["files"]) == sorted(p.relative_to(tmp_path).as_posix() for p in now)
