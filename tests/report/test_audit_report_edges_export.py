"""A benchmark with nothing to export (every item removed, or none removed under --removed) is left out of
the export: an empty data file stops a harness's loader (``datasets`` raises on an empty JSONL and on a
0-row Parquet), and one such task in lmms-eval's group, or one such file under the Parquet folder that
``load_dataset("parquet", data_dir=...)`` globs, stopped the whole export from loading."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scripted_pool import cli, screened


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("edges_export")
    gone = [{"item_id": f"Gone_{i}", "question": f"Which one {i}?",
             "options": ["RIGHT", "w1", "w2", "w3"][i:] + ["RIGHT", "w1", "w2", "w3"][:i], "answer": (4 - i) % 4}
            for i in range(4)]
    stay = [{"item_id": f"Stay_{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(4)]
    items, res, r = screened(root, {"Gone": gone, "Stay": stay})
    assert "Gone: done=4 removed=4" in r.stdout and "Stay: done=4 removed=0" in r.stdout, r.stdout
    return items, res


def export(pool: tuple[Path, Path], fmt: str, out: Path, *extra: str) -> str:
    r = cli("export", "--results", str(pool[1]), "--items", str(pool[0]), "--format", fmt, "--out", str(out),
            "--chain", "1", *extra)
    assert r.returncode == 0, r.stderr
    return r.stderr


def lines(path: Path) -> int:
    return len([x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()])


@pytest.mark.parametrize(("extra", "empty", "full"), [((), "Gone", "Stay"), (("--removed",), "Stay", "Gone")])
def test_lmms_eval_group_names_no_empty_task(pool: tuple[Path, Path], tmp_path: Path, extra: tuple[str, ...],
                                             empty: str, full: str) -> None:
    label = "removed" if extra else "kept"
    err = export(pool, "lmms-eval", tmp_path, *extra)
    assert f"4 {label} items of 1 benchmark" in err
    assert f"note: 1 benchmark without {label} items left out of the export" in err and empty in err
    group = yaml.safe_load((tmp_path / f"_benchcheck_{label}.yaml").read_text())
    assert group["task"] == [f"benchcheck_{full.lower()}_{label}"]
    for name in group["task"]:
        cfg = yaml.safe_load((tmp_path / f"{name}.yaml").read_text().replace("!function ", ""))
        assert lines(Path(cfg["dataset_kwargs"]["data_files"]["test"])) == 4
    assert not (tmp_path / f"{empty}_{label}.jsonl").exists()
    assert all(lines(p) for p in tmp_path.glob("*.jsonl"))


def test_parquet_folder_holds_no_empty_file(pool: tuple[Path, Path], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    export(pool, "parquet", tmp_path)
    files = sorted(tmp_path.glob("data/**/*.parquet"))
    assert [p.parent.name for p in files] == ["Stay"]
    assert all(pq.read_table(p).num_rows for p in files)  # what load_dataset("parquet", data_dir=...) globs
    configs = yaml.safe_load((tmp_path / "README.md").read_text().split("---")[1])["configs"]
    assert [c["config_name"] for c in configs] == ["Stay"]
    try:
        import datasets
    except ImportError:
        return
    ds = datasets.load_dataset("parquet", data_dir=str(tmp_path), cache_dir=str(tmp_path / ".hf"))
    assert ds["train"].num_rows == 4


def test_an_earlier_export_of_a_now_empty_benchmark_is_removed(pool: tuple[Path, Path], tmp_path: Path) -> None:
    from benchcheck.items import Item
    from benchcheck.report.export import Selected
    from benchcheck.report.export import export as write_export

    export(pool, "vlmevalkit", tmp_path, "--removed")
    assert (tmp_path / "Gone_removed.tsv").is_file()
    # the same folder, now the kept items: Gone has none; the Gone_kept.tsv of an earlier kept export (when
    # Gone still had kept items) would be read as kept
    write_export("vlmevalkit", tmp_path, {"Gone": [Selected(Item(item_id="Gone_0", bench="Gone", question="stale",
                                                                  options=("x", "y"), answer=0), None, None)]}, False)
    assert (tmp_path / "Gone_kept.tsv").is_file()
    err = export(pool, "vlmevalkit", tmp_path)
    assert not (tmp_path / "Gone_kept.tsv").exists() and "note: removed 1 file " in err and "Gone_kept.tsv" in err
    assert lines(tmp_path / "Stay_kept.tsv") == 5 and lines(tmp_path / "Gone_removed.tsv") == 5


@pytest.mark.parametrize("fmt", ["lmms-eval", "parquet", "inspect", "vlmevalkit"])
def test_an_export_with_no_item_is_an_error_and_writes_nothing(pool: tuple[Path, Path], tmp_path: Path,
                                                               fmt: str) -> None:
    # every item of Gone is removed: its kept export is empty, which no harness loads (lmms-eval's
    # group of no task, a Parquet folder of no file)
    out = tmp_path / "out"
    r = cli("export", "--results", str(pool[1]), "--items", str(pool[0] / "Gone.jsonl"), "--format", fmt,
            "--out", str(out), "--chain", "1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"error: no kept item to export (4 removed); nothing written to {out}"]
    assert not out.exists()
