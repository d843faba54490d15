"""What users mistype, driven through the real CLI in a subprocess: a results folder with no screening in
it (empty, a sweep's), a report side folder that does not exist, a huge count. Each must end in one
`error:`/usage line naming the option or path and a non-zero exit, never a traceback or an exit 0 that
wrote a report or pool of nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """items.jsonl, a screened results folder (res/step1), an empty folder and a sweep-like folder."""
    d = tmp_path_factory.mktemp("fuzz")
    rows = [{"item_id": f"i{k}", "question": f"What is shown {k}?", "options": ["a", "b", "c", "d"],
             "answer": k % 4} for k in range(6)]
    (d / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    r = _cli("screen", "--items", "items.jsonl", "--step", "1", "--engine", "reference", "--results", "res",
             "--no-progress", cwd=d)
    assert r.returncode == 0 and (d / "res" / "step1").is_dir(), r.stderr
    (d / "empty").mkdir()
    (d / "sweep").mkdir()
    (d / "sweep" / "conditions_results.csv").write_text("bench,condition\n", encoding="utf-8")
    return d


CASES = [
    # (args, words the one error line must name, a path that must not be written)
    (["assemble", "--items", "items.jsonl", "--results", "empty"], ["--results", "empty", "step<k>"],
     "empty/pool_items.parquet"),
    (["assemble", "--items", "items.jsonl", "--results", "sweep"], ["--results", "sweep", "step<k>"],
     "sweep/pool_items.parquet"),
    (["export", "--results", "empty", "--items", "items.jsonl", "--format", "parquet", "--out", "ex"],
     ["--results", "empty", "step<k>"], "ex"),
    (["export", "--results", "sweep", "--items", "items.jsonl", "--format", "lmms-eval", "--out", "ex"],
     ["--results", "sweep", "step<k>"], "ex"),
    (["report", "--results", "empty", "--items", "items.jsonl", "--no-plots", "--out", "rep"],
     ["--results", "empty", "step<k>"], "rep"),
    (["audit", "--results", "sweep", "--items", "items.jsonl", "--out", "au"], ["--results", "sweep"], "au"),
    (["audit", "--results", "", "--items", "items.jsonl", "--out", "au"], ["--results", "''"], "au"),
    (["report", "--results", "res", "--no-plots", "--out", "rep", "--audit", "no_such_audit"],
     ["--audit", "no_such_audit"], "rep"),
    (["report", "--results", "res", "--no-plots", "--out", "rep", "--qa", "items.jsonl"],
     ["--qa", "items.jsonl"], "rep"),
    (["report", "--results", "res", "--no-plots", "--out", "rep", "--sweep", "no_such_sweep"],
     ["--sweep", "no_such_sweep"], "rep"),
    (["report", "--results", "res", "--no-plots", "--out", "rep", "--side-audit", "no_such"],
     ["--side-audit", "no_such"], "rep"),
    (["audit", "--results", "res", "--items", "items.jsonl", "--out", "au", "--rounds", "99999999999999999999"],
     ["--rounds"], "au"),
    # a file for the results folder: said so, not "FILE/conditions_results.csv: no rows to analyze"
    (["sweep", "analyze", "--results", "items.jsonl", "--out", "an"], ["--results", "items.jsonl", "is a file"],
     "an"),
]


@pytest.mark.parametrize(("args", "words", "unwritten"), CASES, ids=[" ".join(c[0])[:70] for c in CASES])
def test_mistyped_input_is_one_line_naming_it(ws: Path, args: list[str], words: list[str], unwritten: str) -> None:
    r = _cli(*args, cwd=ws)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(("error:", "Error:")), r.stderr
    for w in words:
        assert w in last, last
    assert not (ws / unwritten).exists()


def test_sweep_analyze_with_a_file_for_out_is_refused_naming_it(ws: Path) -> None:
    """``--out`` naming a file (an item file, say) was an exit 1 with ``File exists (FileExistsError)``,
    after the analysis ran; it is a usage error naming the option, as every other ``--out`` folder."""
    (ws / "store" / "normalized").mkdir(parents=True, exist_ok=True)  # v_blind reads no video
    r = _cli("sweep", "run", "--items", "items.jsonl", "--store", "store", "--results", "swr", "--engine",
             "reference", "--conds", "v_blind", "--no-progress", cwd=ws)
    assert r.returncode == 0, r.stderr
    before = (ws / "items.jsonl").read_bytes()
    r = _cli("sweep", "analyze", "--results", "swr", "--out", "items.jsonl", cwd=ws)
    assert r.returncode == 2, (r.returncode, r.stderr)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("Error:") and "--out" in last and "items.jsonl" in last and "is a file" in last, r.stderr
    assert (ws / "items.jsonl").read_bytes() == before
    assert not (ws / "swr" / "sweep_analysis_settings.json").exists()


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:abc/v1", "http://127.0.0.1:99999/v1",
                                      "http://127.0.0.1:8001/v1?x=1"])
def test_sweep_run_and_screen_refuse_an_endpoint_url_the_client_cannot_use(ws: Path, endpoint: str) -> None:
    """A port that is not a number was a traceback (``http.client.InvalidURL``) from the sweep's
    context probe; a port out of range or a query reached the servers as requests that all failed."""
    (ws / "store" / "normalized").mkdir(parents=True, exist_ok=True)
    for args in (["sweep", "run", "--items", "items.jsonl", "--store", "store", "--results", "swe",
                  "--conds", "v_1", "--no-progress"],
                 ["screen", "--items", "items.jsonl", "--step", "1", "--results", "scr", "--no-progress"]):
        r = _cli(*args, "--engine", "openai", "--endpoint", endpoint, "--model", "m", cwd=ws)
        assert r.returncode == 2, (args[0], r.returncode, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("error: endpoint ") and endpoint in last, r.stderr
    assert not (ws / "swe" / "conditions_results.csv").exists() and not (ws / "scr" / "step1").exists()
