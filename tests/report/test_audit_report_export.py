"""Exports a lab feeds to its harness (audit-report): only items every step of the chain decided."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from report_helpers import RULES, cli

from benchcheck.store import load_state


@pytest.fixture(scope="module")
def step1_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo's items (each with a video) screened at step 1 only: the visual steps have not run."""
    root = tmp_path_factory.mktemp("half_run")
    items, res = root / "items", root / "results"
    assert cli("demo", "items", "--out", str(items)).returncode == 0
    rules = root / "rules.json"
    rules.write_text(json.dumps(RULES))
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(rules), "--no-progress")
    assert r.returncode == 0, r.stderr
    return items, res


def _exported(out: Path) -> set[str]:
    return {json.loads(line)["item_id"] for p in out.glob("*.jsonl") for line in p.read_text().splitlines()}


def test_export_without_frames_never_claims_items_the_visual_steps_have_not_screened(
        step1_only: tuple[Path, Path], tmp_path: Path) -> None:
    items, res = step1_only
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--out",
            str(tmp_path / "all"))
    # steps 2-6 never ran: nothing is kept yet, and the error says how many wait and why
    assert r.returncode == 2 and not (tmp_path / "all").exists()
    assert "no kept item to export" in r.stderr and "pending" in r.stderr and "without --frames" in r.stderr
    # the chain actually run decides: step 1's survivors are kept
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "lmms-eval", "--chain", "1",
            "--out", str(tmp_path / "one"))
    assert r.returncode == 0, r.stderr
    s1 = load_state(res / "step1")
    assert _exported(tmp_path / "one") == {i for i in s1.ok if not s1.is_removed(i)} != set()


@pytest.fixture(scope="module")
def own_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's flow: init's example clips and items (videos named relative to --videos), step 1."""
    root = tmp_path_factory.mktemp("own")
    assert cli("init", "--example", str(root / "mine")).returncode == 0
    r = cli("init", "--videos", str(root / "mine" / "videos"), "--items", str(root / "mine" / "mybench.jsonl"),
            "--out", str(root / "proj"), "--no-progress")
    assert r.returncode == 0, r.stderr
    proj = root / "proj"
    r = cli("screen", "--step", "1", "--items", str(proj / "items"), "--results", str(proj / "results"),
            "--engine", "reference", "--no-progress")
    assert r.returncode == 0, r.stderr
    return proj


def _utils(folder: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"utils_{folder.name}", folder / "utils.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_lmms_eval_export_names_videos_a_harness_can_open_from_anywhere(
        own_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = own_project
    base = ["export", "--results", str(proj / "results"), "--items", str(proj / "items"), "--format", "lmms-eval",
            "--chain", "1"]
    r = cli(*base, "--store", str(proj / "store"), "--out", str(tmp_path / "abs"))
    assert r.returncode == 0, r.stderr
    docs = [json.loads(x) for x in (tmp_path / "abs" / "mybench_kept.jsonl").read_text().splitlines()]
    assert docs and all(Path(d["video"]).is_absolute() and Path(d["video"]).is_file() for d in docs)
    monkeypatch.chdir(tmp_path)  # the harness runs elsewhere
    utils = _utils(tmp_path / "abs")
    assert all(utils.doc_to_visual(d) == [d["video"]] for d in docs)
    # without --store the names stay as the items wrote them (relative to the videos folder): said on
    # stderr, and a harness that cannot open one stops instead of asking the question without the video
    r = cli(*base, "--out", str(tmp_path / "rel"))
    assert r.returncode == 0, r.stderr
    assert "name their video by a relative path" in r.stderr and "--store" in r.stderr
    docs = [json.loads(x) for x in (tmp_path / "rel" / "mybench_kept.jsonl").read_text().splitlines()]
    assert docs[0]["video"] == "clip0.mp4"
    with pytest.raises(FileNotFoundError, match=r"clip0\.mp4"):
        _utils(tmp_path / "rel").doc_to_visual(docs[0])
    assert _utils(tmp_path / "rel").doc_to_visual({**docs[0], "video": None}) == []
    url = "https://example.org/v/clip0.mp4"  # a URL is the model's to read, not a file to check here
    assert _utils(tmp_path / "rel").doc_to_visual({**docs[0], "video": url}) == [url]


def test_a_benchmark_refused_for_taken_ids_is_named_not_silently_missing(tmp_path: Path) -> None:
    """Two benchmarks numbering their items alike, screened one at a time into one results folder:
    read together, the second one's items are refused as duplicates, and report and export say so."""
    opts = {"question": "Which?", "options": ["a", "b", "c"], "answer": 1}
    for bench in ("One", "Two"):
        (tmp_path / bench).mkdir()
        (tmp_path / bench / f"{bench}.jsonl").write_text(
            "".join(json.dumps({"item_id": f"q{i}", **opts}) + "\n" for i in range(3)))
        r = cli("screen", "--step", "1", "--items", str(tmp_path / bench), "--results", str(tmp_path / "res"),
                "--engine", "reference", "--no-progress")
        assert r.returncode == 0, r.stderr
    both = ["--items", str(tmp_path / "One"), "--items", str(tmp_path / "Two")]
    r = cli("report", "--results", str(tmp_path / "res"), *both, "--chain", "1", "--out", str(tmp_path / "rep"),
            "--no-plots", "--no-progress", "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert "3 bad items are left out of the report" in r.stderr and "duplicate item_id" in r.stderr
    r = cli("export", "--results", str(tmp_path / "res"), *both, "--chain", "1", "--format", "parquet",
            "--out", str(tmp_path / "exp"))
    assert r.returncode == 0, r.stderr
    assert "3 bad items are left out of the export" in r.stderr and "items validate" in r.stderr
