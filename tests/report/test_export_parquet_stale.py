"""A Parquet export is one dataset a folder (``load_dataset("parquet", data_dir=...)`` reads every file
under it): re-exporting fewer benchmarks into the folder of an earlier export leaves no file of the
others behind, which would be read as part of the new one."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from scripted_pool import cli, screened


def test_parquet_reexport_of_fewer_benchmarks_drops_the_others(tmp_path: Path) -> None:
    benches = {name: [{"item_id": f"{name}_{i}", "question": f"Plain {name} {i}?", "options": ["a", "b", "c", "d"],
                       "answer": i % 4} for i in range(3)] for name in ("One", "Two")}
    items, res, _ = screened(tmp_path, benches)
    out = tmp_path / "export"
    (out / "data" / "notes").mkdir(parents=True)
    (out / "data" / "notes" / "keep.txt").write_text("a file of the user's")
    for paths in ([str(items)], [str(items / "One.jsonl")]):
        r = cli("export", "--results", str(res), *[a for p in paths for a in ("--items", p)], "--format", "parquet",
                "--out", str(out), "--chain", "1")
        assert r.returncode == 0, r.stderr
    files = sorted(p.relative_to(out).as_posix() for p in (out / "data").rglob("*.parquet"))
    assert files == ["data/One/test-00000-of-00001.parquet"]
    assert [r["item_id"] for f in files for r in pq.read_table(out / f).to_pylist()] == ["One_0", "One_1", "One_2"]
    assert "Two" not in (out / "README.md").read_text() and not (out / "data" / "Two").exists()
    assert (out / "data" / "notes" / "keep.txt").is_file()
