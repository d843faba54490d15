"""A rerun under another ``--concurrency`` never mixes the earlier latencies into its percentiles.

The answers of a first run are reused by a rerun with the same VLM settings (they are done), but
their latencies were measured under other load: ``qa run --concurrency 3`` over a folder answered at
``--concurrency 1`` reported percentiles over both, under ``settings.concurrency == 3``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import qa_entry, read_json, run_cli, vlm_cmd

from benchcheck.report.qa import read_qa


def _run(dataset: Path, clips: Path, out: Path, concurrency: int, *extra: str) -> Any:
    res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", vlm_cmd(), "--skip-judge", "--concurrency", str(concurrency), *extra], {})
    assert res.returncode == 0, res.stderr
    return res


def test_latencies_of_another_concurrency_are_reported_apart(tmp_path: Path, clips: Path,
                                                             write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry(str(i), f"Q{i}? [say:yes]") for i in range(3)])
    out = tmp_path / "out"
    first = _run(dataset, clips, out, 1, "--limit", "2")
    assert "another --concurrency" not in first.stderr
    head = read_json(out / "summary.json")["latency_s"]
    assert (head["n"], head["concurrency"], head["n_other_concurrency"]) == (2, 1, 0)

    rerun = _run(dataset, clips, out, 3)
    assert "2 answered before, 1 to ask" in rerun.stdout + rerun.stderr
    summary = read_json(out / "summary.json")
    lat = read_json(out / "latency_summary.json")
    measured = {i["id"]: (i["concurrency"], i["latency_s"]) for i in lat["items"]}
    assert {k: c for k, (c, _) in measured.items()} == {"0": 1, "1": 1, "2": 3}
    # The headline counts the one item measured at --concurrency 3, and says the two others are apart.
    head = summary["latency_s"]
    assert (head["n"], head["concurrency"], head["n_other_concurrency"]) == (1, 3, 2)
    assert head["p50"] == head["max"] == measured["2"][1]
    by = summary["latency_s_by_concurrency"]
    assert list(by) == ["1", "3"] and (by["1"]["n"], by["3"]["n"]) == (2, 1)
    assert by["1"]["mean"] == pytest.approx((measured["0"][1] + measured["1"][1]) / 2)
    assert lat["stats_over_successful_items"] == head and lat["stats_by_concurrency"] == by
    (row,) = csv.DictReader(io.StringIO((out / "summary.csv").read_text()))
    assert row["concurrency"] == "3" and float(row["latency_p50_s"]) == pytest.approx(measured["2"][1])
    assert "latency: over the 1 items measured at --concurrency 3; 2 answers reused from a run at another " \
           "--concurrency (1) are left out" in rerun.stderr
    assert read_qa(out).latencies == [measured["2"][1]]  # the report's histogram counts what the percentiles do

    # Back at --concurrency 1 (nothing to ask): the two items measured there, the third apart.
    back = _run(dataset, clips, out, 1)
    assert "3 answered before, 0 to ask" in back.stdout + back.stderr
    head = read_json(out / "summary.json")["latency_s"]
    assert (head["n"], head["concurrency"], head["n_other_concurrency"]) == (2, 1, 1)
    assert head["max"] == max(measured["0"][1], measured["1"][1])
