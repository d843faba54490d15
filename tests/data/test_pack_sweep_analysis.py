"""pack of a sweep takes the analysis `sweep analyze` wrote, wherever its --out was: the layout the
docs and `init` print (`sweep/analysis` beside `sweep/results`), a folder elsewhere, and an older
settings file that recorded no folder; the report lists each analysis file with its sha256, and
a sweep packed without an analysis says so in one line. Real CLI runs, real files."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

from benchcheck.sweep.constructed import World, world_rows
from benchcheck.sweep.report import SETTINGS_NAME
from benchcheck.sweep.results import COLUMNS, CSV_NAME

SRC = str(Path(__file__).resolve().parents[2] / "src")


def bc(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "benchcheck", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def sweep_results(results: Path) -> Path:
    rows = world_rows(World(n_items=40, n_videos=20), "MVBench", np.random.default_rng(3))
    results.mkdir(parents=True)
    with (results / CSV_NAME).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return results


def analyze(cwd: Path, results: str, out: str, *extra: str) -> None:
    r = bc("sweep", "analyze", "--results", results, "--out", out, "--n-perm", "50", *extra, cwd=cwd)
    assert r.returncode == 0, r.stderr


def tar_members(tarball: Path) -> dict[str, bytes]:
    with tarfile.open(tarball) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_the_documented_layout_packs_the_summary_and_plots(tmp_path: Path) -> None:
    sweep_results(tmp_path / "proj" / "sweep" / "results")
    analyze(tmp_path, "proj/sweep/results", "proj/sweep/analysis")  # as docs/getting-started.md and init say
    r = bc("pack", "--results", "proj/sweep/results", "--out", "proj/pack/sweep.tar.gz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = tar_members(tmp_path / "proj" / "pack" / "sweep.tar.gz")
    analysis = {n for n in names if n.startswith("proj/sweep/analysis/")}
    assert {"proj/sweep/analysis/sweep_summary.md", "proj/sweep/analysis/sweep_summary.csv",
            "proj/sweep/analysis/sweep_overview.png", "proj/sweep/analysis/sweep_MVBench.png"} == analysis
    assert f"proj/sweep/results/{SETTINGS_NAME}" in names
    folder = (tmp_path / "proj" / "sweep" / "analysis").resolve()
    assert (f"analysis: 4 files from {folder} (the folder proj/sweep/results/{SETTINGS_NAME} records)"
            in r.stdout.splitlines())
    assert "no sweep analysis" not in r.stderr
    # the report is the pack's manifest of the analysis: each file's path in the tarball and its sha256
    rep = json.loads((tmp_path / "proj" / "pack" / "sweep.report.json").read_text())
    listed = {f["path"]: f["sha256"] for f in rep["analysis"]["files"]}
    assert set(listed) == analysis
    assert all(hashlib.sha256(names[p]).hexdigest() == h for p, h in listed.items())
    md = (tmp_path / "proj" / "pack" / "sweep.report.md").read_text()
    assert "## Sweep analysis" in md and "`proj/sweep/analysis/sweep_summary.md` sha256 " in md


def test_an_out_folder_elsewhere_is_found_through_the_settings_file(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "scratch" / "my analysis"
    sweep_results(work / "results")
    (work / "results" / "notes.txt").write_text("not an analysis output\n")
    analyze(work, "results", str(elsewhere), "--no-plots")
    (elsewhere / "unrelated.csv").write_text("left out: sweep analyze did not write it\n")
    r = bc("pack", "--results", "results", "--out", "ret.tar.gz", cwd=work)
    assert r.returncode == 0, r.stderr
    names = tar_members(work / "ret.tar.gz")
    # outside the current folder: under its own name, beside results/
    assert {"my analysis/sweep_summary.md", "my analysis/sweep_summary.csv"} == {n for n in names
                                                                                  if n.startswith("my analysis/")}
    assert f"analysis: 2 files from {elsewhere} (the folder results/{SETTINGS_NAME} records)" in r.stdout


def test_an_older_settings_file_and_no_analysis_at_all(tmp_path: Path) -> None:
    results = sweep_results(tmp_path / "sweep" / "results")
    analyze(tmp_path, "sweep/results", "sweep/analysis", "--no-plots")
    settings = results / SETTINGS_NAME
    older = {k: v for k, v in json.loads(settings.read_text()).items() if k != "out"}
    settings.write_text(json.dumps(older))  # what a benchcheck before the recorded folder wrote
    r = bc("pack", "--results", "sweep/results", "--out", "a.tar.gz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "sweep/analysis/sweep_summary.md" in tar_members(tmp_path / "a.tar.gz")
    assert "(beside the results (no folder recorded))" in r.stdout

    bare = sweep_results(tmp_path / "bare" / "results")
    r = bc("pack", "--results", bare, "--out", tmp_path / "b.tar.gz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "sweep analysis" in line]
    assert said == [f"note: no sweep analysis found beside {bare}: the pack holds the rows, not the summary or "
                    f"plots; run `benchcheck sweep analyze --results {bare} --out DIR` and pack again to include it"]
    assert "analysis:" not in r.stdout
    assert json.loads((tmp_path / "b.report.json").read_text())["analysis"] is None
