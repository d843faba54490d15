"""A user-style benchmark end to end, with no hand edit: items that name their clips by file name,
a folder of mp4s; normalize, frames, steps 1-6, sweep, audit, report, export. And the README's
"Your own benchmark" section, run as written."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from own_helpers import bc, item, make_clips, write_items, write_rules

from benchcheck.items import load_items
from benchcheck.screen.steps import STEPS
from benchcheck.store import read_rows

README = Path(__file__).resolve().parents[2] / "README.md"


def screened(step_dir: Path) -> set[str]:
    return {r["item_id"] for f in step_dir.glob("*.jsonl") for r in read_rows(f) if r.get("status") == "ok"}


def test_items_to_report_with_no_hand_edit(tmp_path: Path) -> None:
    raw, store, frames, res = tmp_path / "raw", tmp_path / "store", tmp_path / "frames", tmp_path / "results"
    make_clips(raw)
    (raw / "sub").mkdir()
    (raw / "clip2.mp4").rename(raw / "sub" / "clip2.mp4")
    rows = [item(k, ["clip0.mp4", "clip1.mp4", "sub/clip2.mp4", str(raw / "clip0.mp4")][k % 4]) for k in range(8)]
    rows += [item(8, "gone.mp4"), item(9, None)]
    items = write_items(tmp_path / "mybench.jsonl", rows)
    with_video = {f"q{k}" for k in range(8)}
    rules = write_rules(tmp_path / "rules.json")
    eng = ("--engine", "scripted", "--rules", rules)

    assert bc("videos", "normalize", raw, "--store", store, "--no-progress").exit_code == 0
    r = bc("frames", "extract", "--store", store, "--items", items, "--videos", raw, "--out", frames, "--no-progress")
    assert r.exit_code == 0, r.output
    assert "3 videos extracted" in r.stdout and "q8: no such video file" in r.stderr
    vis = ("--frames", frames, "--store", store, "--videos", raw)
    for step in range(1, 7):
        r = bc("screen", "--items", items, "--results", res, "--step", str(step), *eng, *vis, "--no-progress")
        assert r.exit_code == 0, r.output
        got = screened(res / f"step{step}")
        # Nothing is removed (the scripted model is never sure), so every step sees every item it can.
        assert got == (with_video if STEPS[step].visual else with_video | {"q8", "q9"}), (step, r.output)
    plan = bc("screen", "--items", items, "--results", res, "--step", "2", *vis, "--plan-only")
    assert "NO_VIDEO=2" in plan.stdout and "MISSING_FRAMES=0" in plan.stdout and "REMAINING_TOTAL=0" in plan.stdout

    sweep = tmp_path / "sweep"
    conds = "v_blind,v_1,v_8_s224,v_32_s168"
    r = bc("sweep", "run", "--items", items, "--store", store, "--videos", raw, "--results", sweep / "results",
           "--conds", conds, *eng, "--decode-workers", "0", "--no-progress")
    assert r.exit_code == 0, r.output
    cells: dict[str, set[str]] = defaultdict(set)
    failed: dict[str, set[str]] = defaultdict(set)  # the items without a video: an error row each, no answer
    with (sweep / "results" / "conditions_results.csv").open() as f:
        for row in csv.DictReader(f):
            (failed if row["status"] == "error" else cells)[row["condition"]].add(row["item_id"])
    assert cells["v_blind"] == with_video | {"q8", "q9"} and not failed["v_blind"]
    assert all(cells[c] == with_video for c in conds.split(",")[1:]), dict(cells)
    assert all(failed[c] == {"q8", "q9"} for c in conds.split(",")[1:]), dict(failed)
    r = bc("sweep", "analyze", "--results", sweep / "results", "--out", sweep / "analysis", "--no-plots")
    assert r.exit_code == 0, r.output

    linked = tmp_path / "items"
    r = bc("items", "link", items, "--store", store, "--videos", raw, "--out", linked)
    assert r.exit_code == 0 and "8 items with a video found" in r.stdout
    assert {i.item_id for i in load_items([linked]).items if i.has_frames_source} == with_video
    r = bc("audit", "--results", res, "--items", linked, "--out", tmp_path / "audit", "--rounds", "50", "--quiet")
    assert r.exit_code == 0, r.output
    r = bc("report", "--results", res, "--items", linked, "--frames", frames, "--sweep", sweep, "--audit",
           tmp_path / "audit", "--out", tmp_path / "report", "--no-plots", "--no-progress", "--workers", "1")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "report" / "index.html").is_file() and "1 benchmark, 10 items" in r.stderr
    # The raw items too: the report resolves their videos for the thumbnails the same way.
    r = bc("report", "--results", res, "--items", items, "--store", store, "--videos", raw, "--frames", frames,
           "--copy-frames", "--out", tmp_path / "report_raw", "--no-plots", "--no-progress", "--workers", "1")
    assert r.exit_code == 0, r.output
    ids = {i.video_id for i in load_items([linked]).items if i.has_frames_source}
    assert {p.name for p in (tmp_path / "report_raw" / "frames").iterdir()} == ids
    r = bc("export", "--results", res, "--items", linked, "--format", "parquet", "--out", tmp_path / "export")
    assert r.exit_code == 0, r.output
    assert "10 kept items of 1 benchmark" in r.stderr


def readme_block(heading: str) -> str:
    """The first fenced bash block under a README heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```bash\n(.*?)```", section, re.S)
    assert m, f"no bash block under {heading!r}"
    return m.group(1)


def test_readme_your_own_benchmark_runs_as_written(tmp_path: Path) -> None:
    block = readme_block("Your own benchmark")
    assert len(block.splitlines()) <= 12
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2] / "src"),
                                                      os.environ.get("PYTHONPATH")) if p)}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    proj = tmp_path / "proj"
    for step in range(1, 7):
        assert len(screened(proj / "results" / f"step{step}")) == 8  # every example item at every step
    assert (proj / "report" / "index.html").is_file()
    assert (proj / "export" / "README.md").is_file()
    assert json.loads((proj / "report" / "report.json").read_text())
