"""What a user types wrong gets one `error:` line (or click's usage error) and a non-zero exit, never a
traceback; a command that can do nothing says why. Each test is one case an outsider met."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from benchcheck.cli import main


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def _refused(r: Result, *words: str) -> None:
    """Exit 2, no exception escaped (click's runner catches it: exit 1 and ``r.exception``), and the
    output names each of ``words``."""
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    for w in words:
        assert w in r.output, r.output


def _items(path: Path, n: int = 4, bench: str | None = None) -> Path:
    rows = [{"item_id": f"i{k}", "question": f"What is shown {k}?", "options": ["a", "b", "c", "d"],
             "answer": k % 4, **({"bench": bench} if bench else {})} for k in range(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_model_tiny_refuses_a_negative_seed_before_writing(tmp_path: Path) -> None:
    """numpy raised `expected non-negative integer` as a traceback, after the tokenizer files were written."""
    out = tmp_path / "tiny"
    _refused(_run(["model", "tiny", "--out", str(out), "--seed", "-1"]), "--seed")
    assert not out.exists()


def test_demo_out_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    """`demo items --out FILE` raised FileExistsError from mkdir."""
    f = tmp_path / "f"
    f.write_text("x")
    for cmd in (["demo", "items"], ["demo", "run", "--no-qa", "--no-sweep"]):
        _refused(_run([*cmd, "--out", str(f)]), "is a file")
    assert f.read_text() == "x"


def test_screen_counts_and_results_file_are_checked_first(tmp_path: Path, tiny_model: Path) -> None:
    """--max-unit 0 divided by zero; --limit 0 / --batch-items -1 ran nothing (or the default) with exit 0;
    a --results that is a file raised NotADirectoryError."""
    items = _items(tmp_path / "items" / "B.jsonl")
    f = tmp_path / "f"
    f.write_text("x")
    base = ["screen", "--items", str(items), "--step", "1", "--model", str(tiny_model), "--device", "cpu",
            "--no-progress"]
    res = str(tmp_path / "res")
    for extra, word in ((["--max-unit", "0"], "--max-unit"), (["--limit", "0"], "--limit"),
                        (["--batch-items", "-1"], "--batch-items")):
        _refused(_run([*base, "--results", res, *extra]), word)
    _refused(_run([*base, "--results", str(f)]), "is a file")
    assert not (tmp_path / "res").exists() and f.read_text() == "x"


def test_sweep_and_launch_counts_are_checked(tmp_path: Path) -> None:
    """sweep --limit -1 planned nothing and exited 0; slurm script --step 9 wrote a script for no step."""
    items = _items(tmp_path / "items" / "B.jsonl")
    res = str(tmp_path / "res")
    _refused(_run(["sweep", "dry-run", "--items", str(items), "--results", res, "--limit", "-1"]), "--limit")
    _refused(_run(["sweep", "run", "--items", str(items), "--results", res, "--engine", "reference",
                   "--chunk", "0"]), "--chunk")
    _refused(_run(["slurm", "script", "--step", "9", "--array", "2"]), "--step")
    _refused(_run(["launch", "--step", "1", "--items", str(items), "--results", res, "--port0", "70000",
                   "--plan-only"]), "--port0")
    assert not (tmp_path / "res").exists()


def test_a_store_that_does_not_exist_is_refused_by_sweep_and_launch(tmp_path: Path) -> None:
    """sweep run --store <typo> wrote the blind rows, a "missing" line for every visual cell, and
    exited 0; launch would have started servers for it. A dry run still plans before the store is
    made (it lists what is missing)."""
    items = _items(tmp_path / "items" / "B.jsonl")
    res = str(tmp_path / "res")
    missing = str(tmp_path / "stroe")
    _refused(_run(["sweep", "run", "--items", str(items), "--results", res, "--engine", "reference",
                   "--store", missing]), "--store", "stroe")
    _refused(_run(["sweep", "run", "--items", str(items), "--results", res, "--engine", "reference",
                   "--store", ""]), "--store")  # --store "$STORE" with STORE unset
    assert _run(["sweep", "dry-run", "--items", str(items), "--results", res, "--store", missing]).exit_code == 0
    _refused(_run(["launch", "--sweep", "--plan-only", "--items", str(items), "--results", res, "--store",
                   missing]), "--store")
    assert not (tmp_path / "res" / "conditions_results.csv").exists()


def test_a_folder_that_is_not_a_store_is_refused_by_every_command_that_reads_one(tmp_path: Path) -> None:
    """--store pointed at the frame cache or the videos' folder (it exists) was taken: sweep run
    wrote a "missing" line for every visual cell and exited 0, report built no thumbnails. Every
    command that reads a store now names the folder and what is wrong; an empty store that
    `videos normalize` made (normalized/ and nothing in it) is still a store."""
    items = _items(tmp_path / "items" / "B.jsonl")
    res = tmp_path / "res"
    res.mkdir()
    wrong = tmp_path / "frames_not_store"
    (wrong / "v1").mkdir(parents=True)
    w = str(wrong)
    for args in (["sweep", "run", "--items", str(items), "--results", str(res), "--engine", "reference"],
                 ["launch", "--sweep", "--plan-only", "--items", str(items), "--results", str(res)],
                 ["launch", "--step", "1", "--plan-only", "--items", str(items), "--results", str(res)],
                 ["report", "--results", str(res)],
                 ["export", "--results", str(res), "--items", str(items), "--format", "lmms-eval",
                  "--out", str(tmp_path / "x")],
                 ["items", "stats", str(items)],
                 ["items", "link", str(items), "--out", str(tmp_path / "linked")],
                 ["frames", "extract", "--items", str(items), "--out", str(tmp_path / "fr")]):
        _refused(_run([*args, "--store", w]), "--store", "frames_not_store", "not a normalized store")
    r = _run(["screen", "--items", str(items), "--step", "2", "--results", str(res), "--store", w, "--plan-only"])
    _refused(r, "--store", "frames_not_store", "not a normalized store")
    (wrong / "normalized").mkdir()
    assert _run(["sweep", "run", "--items", str(items), "--results", str(res), "--engine", "reference",
                 "--store", w, "--no-progress", "--limit", "1"]).exit_code == 0
    assert not (tmp_path / "x").exists() and not (tmp_path / "fr").exists()


def test_a_store_or_frame_cache_that_does_not_exist_is_refused_by_report_and_export(tmp_path: Path) -> None:
    """report --store <typo> built a report without thumbnails, export --frames <typo> counted every
    visual step as not screened; both exited 0."""
    (tmp_path / "res").mkdir()
    res, missing = str(tmp_path / "res"), str(tmp_path / "stroe")
    _refused(_run(["report", "--results", res, "--store", missing]), "--store")
    _refused(_run(["report", "--results", res, "--frames", missing]), "--frames")
    items = _items(tmp_path / "items" / "B.jsonl")
    _refused(_run(["export", "--results", res, "--items", str(items), "--frames", missing, "--format", "lmms-eval",
                   "--out", str(tmp_path / "x")]), "--frames")
    assert not (tmp_path / "x").exists()


def test_assemble_results_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    """assemble --results FILE raised FileExistsError from mkdir."""
    items = _items(tmp_path / "items" / "B.jsonl")
    f = tmp_path / "f"
    f.write_text("x")
    _refused(_run(["assemble", "--items", str(items), "--results", str(f)]), "is a file")


def test_screen_bench_that_no_item_has_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    """--bench with a typo filtered every item out and exited 0 with '0 ok' (sweep already refused it)."""
    items = _items(tmp_path / "items" / "B.jsonl")
    base = ["screen", "--items", str(items), "--step", "1", "--model", str(tiny_model), "--device", "cpu",
            "--no-progress", "--results", str(tmp_path / "res")]
    for extra in ([], ["--plan-only"]):
        _refused(_run([*base, "--bench", "B, Nope", *extra]), "--bench: no items for Nope (have B)")
    assert not (tmp_path / "res").exists()


def test_chain_that_is_not_numbers_names_the_chain(tmp_path: Path) -> None:
    """`--chain 1,x` printed int()'s message (`invalid literal for int() with base 10: 'x'`)."""
    items = _items(tmp_path / "items" / "B.jsonl")
    r = _run(["audit", "--results", str(tmp_path), "--items", str(items), "--out", str(tmp_path / "a"),
              "--chain", "1,x"])
    _refused(r, "chain '1,x'", "step numbers")
    assert "int()" not in r.output


def test_kept_list_that_cannot_be_read_is_one_line(tmp_path: Path, tiny_model: Path) -> None:
    """A --keep JSONL with a broken line, or a Parquet file that is not one (or lacks item_id), raised
    JSONDecodeError / ArrowInvalid / KeyError from screen and assemble."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = _items(tmp_path / "items" / "B.jsonl")
    broken = tmp_path / "keep.jsonl"
    broken.write_text('{"item_id": "i0"}\n{broken\n')
    notparquet = tmp_path / "keep.parquet"
    notparquet.write_bytes(b"\x00" * 64)
    noid = tmp_path / "noid.parquet"
    pq.write_table(pa.table({"foo": [1]}), noid)
    (tmp_path / "res" / "step1").mkdir(parents=True)  # assemble refuses a folder with no step<k> first
    cases = ((broken, "keep.jsonl:2: line is not JSON"), (notparquet, "keep.parquet: cannot read Parquet"),
             (noid, "noid.parquet: no item_id column"))
    for keep, said in cases:
        _refused(_run(["assemble", "--items", str(items), "--results", str(tmp_path / "res"), "--keep", str(keep)]),
                 said)
        _refused(_run(["screen", "--items", str(items), "--step", "1", "--model", str(tiny_model), "--device", "cpu",
                       "--results", str(tmp_path / "res"), "--keep", str(keep), "--plan-only"]), said)


def test_item_folder_without_item_files_is_named(tmp_path: Path) -> None:
    """`items validate EMPTY_DIR` printed an empty table and exited 0: nothing was validated."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not items")
    r = _run(["items", "validate", str(empty)])
    assert r.exit_code == 1 and "no item files (.jsonl, .json, .csv, .parquet) in this folder" in r.output, r.output
    _refused(_run(["items", "stats", str(empty)]), f"no items in {empty} (no item files")


def test_videos_normalize_with_no_video_file_is_refused(tmp_path: Path) -> None:
    """A folder without a video file gave '0 normalized ... 0 failed' and exit 0."""
    empty = tmp_path / "clips"
    empty.mkdir()
    (empty / "readme.txt").write_text("x")
    _refused(_run(["videos", "normalize", str(empty), "--store", str(tmp_path / "store"), "--no-progress"]),
             "no video file", str(empty))
    assert not (tmp_path / "store").exists()


def test_an_output_folder_the_system_refuses_is_one_line(tmp_path: Path) -> None:
    """`--out` below a file: mkdir raised NotADirectoryError as a traceback, in every command that
    writes a folder. Now one line naming the path and the error's kind, exit 1, from the CLI's one rule."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for args in (["model", "tiny", "--out", str(blocker / "tiny")], ["demo", "items", "--out", str(blocker / "d")]):
        r = _run(args)
        assert r.exit_code == 1 and isinstance(r.exception, SystemExit), (r.output, r.exception)
        assert "Traceback" not in r.output and str(blocker) in r.output and "NotADirectoryError" in r.output
        assert len([line for line in r.output.splitlines() if line.strip()]) == 1, r.output


def test_every_float_and_seed_option_refuses_what_is_no_number_or_no_seed(tmp_path: Path) -> None:
    """`sweep analyze --alpha nan` and `audit --fdr-level nan` were taken (click's range lets nan
    through: every comparison with it is false) and every test then failed without a word;
    `audit --seed -1` ended in numpy's traceback. Each is one usage line (exit 2)."""
    items = _items(tmp_path / "items" / "B.jsonl")
    (tmp_path / "res" / "step1").mkdir(parents=True)
    res = str(tmp_path / "res")
    cases = [
        (["sweep", "analyze", "--results", res, "--out", str(tmp_path / "a"), "--alpha", "nan"], "--alpha"),
        (["sweep", "analyze", "--results", res, "--out", str(tmp_path / "a"), "--margin", "inf"], "--margin"),
        (["sweep", "analyze", "--results", res, "--out", str(tmp_path / "a"), "--seed", "-1"], "--seed"),
        (["audit", "--results", res, "--items", str(items), "--out", str(tmp_path / "a"), "--fdr-level", "nan"],
         "--fdr-level"),
        (["audit", "--results", res, "--items", str(items), "--out", str(tmp_path / "a"), "--seed", "-1"], "--seed"),
        (["screen", "--items", str(items), "--step", "1", "--results", res, "--extra-band", "nan"], "--extra-band"),
        (["qa", "run", "--timeout", "nan"], "--timeout"),
        (["serve", "--engine", "reference", "--model", "rules", "--body-timeout", "nan"], "--body-timeout"),
        (["launch", "--step", "1", "--items", str(items), "--results", res, "--server-timeout", "nan"],
         "--server-timeout"),
        (["demo", "run", "--seed", "-1"], "--seed"),
    ]
    for args, flag in cases:
        _refused(_run(args), flag)
    assert not (tmp_path / "a").exists()
