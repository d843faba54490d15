"""Every format's folder is read whole by its harness (lmms-eval's ``--include_path``, a glob over the
TSVs or the Inspect files): re-exporting fewer benchmarks into the folder of an earlier export removes
the others' files, which would be read as part of the new one, and nothing but the format's own
per-benchmark files of its own selection."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchcheck.items import Item
from benchcheck.report.export import FORMATS, Selected, export
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
    assert notes == [[], [f"note: removed {len(TWO[fmt])} files an earlier export wrote for benchmarks not in "
                          f"this one: {', '.join(TWO[fmt])}"]]


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
    # the formats (and a kept and a removed export) share a folder: no pattern may match a file another
    # writes, and every per-benchmark file a format writes is matched by its own pattern
    from benchcheck.report.export import BENCH_PATTERNS

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
