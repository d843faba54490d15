"""The report's sweep and QA sections from real files, its tolerance of missing or partial inputs,
the item data chunks, and the CLI's one-line errors."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from report_helpers import cli, screened_pool

from benchcheck.items import load_items
from benchcheck.report import ReportOptions, build_report
from benchcheck.report.browser import LIST_FIELDS
from benchcheck.store import load_state


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return screened_pool(tmp_path_factory.mktemp("sections"))


def chunks(out: Path, key_prefix: str) -> list[Any]:
    """Every record of the data chunks whose file names start with ``key_prefix`` (e.g. 'd')."""
    recs: list[Any] = []
    for p in sorted((out / "data").glob(f"*/{key_prefix}*.js")):
        text = p.read_text()
        assert text.startswith("BC_DATA(") and text.endswith(");\n")
        recs += json.loads(text[len("BC_DATA("):-3].split(",", 1)[1])
    return recs


def write_sweep(folder: Path, items: Path) -> dict[str, tuple[int, int]]:
    """A conditions_results.csv as the sweep writes it; returns expected (correct, n) per condition."""
    rows, expected = [], {}
    json_items = [i for i in load_items([items]).items if i.bench == "DemoJson"][:40]
    letters = "ABCDEFGH"
    for cond, right_every in (("v_32_s168", 4), ("v_32_s448", 1), ("v_8_s224", 3), ("v_128_s224", 3)):
        k = 0
        for j, it in enumerate(json_items):
            gold = letters[it.answer]
            pred = gold if j % right_every == 0 else letters[(it.answer + 1) % len(it.options)]
            k += pred == gold
            rows.append({"bench": it.bench, "item_id": it.item_id, "condition": cond, "pred": pred, "gold": gold,
                         "status": "ok"})
        expected[cond] = (k, len(json_items))
    rows.append({"bench": "DemoJson", "item_id": "DemoJson_0", "condition": "v_fps2_s224", "pred": "", "gold": "A",
                 "status": "NA"})
    (folder / "results").mkdir(parents=True)
    with (folder / "results" / "conditions_results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return expected


def test_sweep_section_accuracy_verdicts_and_item_answers(pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, res = pool
    expected = write_sweep(tmp_path / "sweep", items)
    out = tmp_path / "report"
    build_report(ReportOptions(res, out, load_items([items]).items, sweep=tmp_path / "sweep"))
    html = (out / "sweep.html").read_text()
    assert 'id="verdicts"' in html and "No sweep" not in html
    k, n = expected["v_32_s448"]
    assert f"{100 * k / n:.1f}%" in html  # 100.0% at s448, against 25% at s168: pixels help
    assert ">pixels<" in html
    assert (out / "img" / "sweep_DemoJson.svg").stat().st_size > 5_000
    rec = next(r for r in chunks(out, "d") if r["id"] == "DemoJson_0")
    conds = {a[0]: a for a in rec["sweep"]}
    assert conds["v_32_s448"][2] is True and conds["v_fps2_s224"][3] == "NA" and conds["v_fps2_s224"][2] is None


@pytest.mark.parametrize("case", ["missing", "empty", "no_correctness"])
def test_missing_or_partial_sweep_is_a_clear_no_sweep(pool: tuple[Path, Path], tmp_path: Path, case: str) -> None:
    _, res = pool
    sweep = tmp_path / "sweep"
    if case != "missing":
        (sweep / "results").mkdir(parents=True)
        text = "" if case == "empty" else "bench,item_id,condition,latency\nDemoJson,DemoJson_0,v_1,0.3\n"
        (sweep / "results" / "conditions_results.csv").write_text(text)
    out = tmp_path / "report"
    build_report(ReportOptions(res, out, None, sweep=sweep, plots=False))
    html = (out / "sweep.html").read_text()
    assert 'id="no-sweep"' in html
    assert {"missing": "no sweep results in", "empty": "cannot read the sweep",
            "no_correctness": "no column for correctness"}[case] in html


def test_qa_section_from_a_real_qa_run(pool: tuple[Path, Path], tmp_path: Path) -> None:
    _, res = pool
    vlm = tmp_path / "vlm.py"
    vlm.write_text("import json, sys\nq = sys.argv[2]\nif 'crash' in q:\n    sys.exit(4)\n"
                   "print(json.dumps({'answer': 'yes', 'model': 'vlm-x'}))\n")
    (tmp_path / "clips").mkdir()
    data = []
    for i, q in enumerate(["is it red?", "is it blue?", "crash now"]):
        (tmp_path / "clips" / f"c{i}.mp4").write_bytes(b"\0" * 16)
        data.append({"id": f"q{i}", "query": q, "ground_truth": "yes", "evaluation_method": ["qa"],
                     "video": f"c{i}.mp4"})
    (tmp_path / "qa.json").write_text(json.dumps(data))
    r = cli("qa", "run", "--dataset", str(tmp_path / "qa.json"), "--videos", str(tmp_path / "clips"),
            "--output-dir", str(tmp_path / "qa"), "--vlm-cmd", f"{sys.executable} {vlm} {{video}} {{question}}",
            "--skip-judge")
    assert r.returncode == 3, r.stderr  # one item errored
    out = tmp_path / "report"
    build_report(ReportOptions(res, out, None, qa=tmp_path / "qa"))
    html = (out / "qa.html").read_text()
    assert 'id="latency"' in html and "vlm-x" in html
    assert "vlm: exit" in html  # errors by kind
    assert (out / "img" / "qa_latency.svg").is_file()


def test_without_items_ids_and_margins_come_from_rows(pool: tuple[Path, Path], tmp_path: Path) -> None:
    _, res = pool
    out = tmp_path / "report"
    built = build_report(ReportOptions(res, out, None, plots=False))
    step1 = load_state(res / "step1")
    assert built.items == len(step1.ok)
    recs = {r["id"]: r for r in chunks(out, "d")}
    r = recs["DemoJson_21"]
    assert r["no_text"] and r["steps"][0]["margins"] == [round(m, 3) for m in step1.ok["DemoJson_21"]["margins"]]
    listed = chunks(out, "l")
    assert len(listed) == len(step1.ok) and all(len(x) == len(LIST_FIELDS) for x in listed)
    assert all(x[LIST_FIELDS.index("confidence")] is None for x in listed)  # no --audit: no confidence


def test_rebuild_replaces_the_report_whole_and_refuses_foreign_folders(pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, res = pool
    out = tmp_path / "report"
    build_report(ReportOptions(res, out, load_items([items]).items, plots=False))
    (out / "data" / "stale.js").write_text("old")
    build_report(ReportOptions(res, out, [i for i in load_items([items]).items if i.bench == "DemoJson"],
                               plots=False))
    assert not (out / "data" / "stale.js").exists() and not (out / "data" / "DemoNext").exists()
    assert not list(tmp_path.glob(".report.*"))  # no staging or old folder left behind
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    r = cli("report", "--results", str(res), "--out", str(foreign), "--no-progress")
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "not a BenchCheck report" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and (foreign / "notes.txt").read_text() == "keep me"
    r = cli("report", "--results", str(res), "--chain", "1,9", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "chain" in r.stderr


def test_a_killed_builds_folders_are_cleared_by_the_next_build(pool: tuple[Path, Path], tmp_path: Path) -> None:
    # A kill between a build's two renames leaves its staging folder and the report it moved
    # aside (the same command again rebuilds, but they stayed, a report's size each). The next
    # build removes those whose writer is dead and leaves a live writer's alone.
    import subprocess
    import sys

    _, res = pool
    out = tmp_path / "report"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    for name in (f".report.building-{dead}-0123abcd", f".report.old-{dead}-4567cdef",
                 f".report.building-{os.getpid()}-89abcdef"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "index.html").write_text("left")
    build_report(ReportOptions(res, out, None, plots=False))
    assert (out / "report.json").is_file()
    assert sorted(p.name for p in tmp_path.glob(".report.*")) == [f".report.building-{os.getpid()}-89abcdef"]


def test_first_page_is_small_and_needs_no_network(pool: tuple[Path, Path], tmp_path: Path) -> None:
    items, res = pool
    out = tmp_path / "report"
    build_report(ReportOptions(res, out, load_items([items]).items))
    for page in out.rglob("*.html"):
        text = page.read_text()
        assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    js = (out / "static" / "browser.js").read_text()
    assert "fetch(" not in js and "XMLHttpRequest" not in js and "http" not in js


def test_frame_thumbnails_linked_or_copied_small(tmp_path: Path) -> None:
    """A visual step run by the real runner on a real frame cache: the item data name the frames
    it showed; --frames links them, --copy-frames copies them at most 160 px."""
    from PIL import Image

    cache, items = tmp_path / "pool_frames", tmp_path / "items"
    items.mkdir()
    rows = []
    for v in range(3):
        vid = f"{v:032x}"
        (cache / vid).mkdir(parents=True)
        for k in range(32):
            Image.new("RGB", (448, 252), (8 * k, 40 * v, 90)).save(cache / vid / f"frame_{k}.jpg", quality=85)
        (cache / vid / "frames.json").write_text(json.dumps({"positions": list(range(32))}))
        rows.append({"item_id": f"Vid_{v}", "question": f"What colour is clip {v}?", "options": ["red", "blue"],
                     "answer": 0, "video_id": vid})
    (items / "Vid.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -2.0, "B": -0.2}}]))
    res = tmp_path / "results"
    for step in (1, 2):
        r = cli("screen", "--items", str(items), "--step", str(step), "--results", str(res), "--engine", "scripted",
                "--rules", str(rules), "--frames", str(cache), "--no-progress")
        assert r.returncode == 0, r.stderr
    linked = tmp_path / "linked"
    build_report(ReportOptions(res, linked, load_items([items]).items, frames=cache, plots=False))
    index = (linked / "data" / "index.js").read_text()
    assert '"frames":"../pool_frames"' in index
    step2_rows = load_state(res / "step2").ok
    assert step2_rows
    recs = [r for r in chunks(linked, "d") if r["id"] in step2_rows]
    for rec in recs:
        step2 = next(s for s in rec["steps"] if s["s"] == 2)
        assert step2["frames"] == [16] and rec["vid"] == step2_rows[rec["id"]]["video_id"]
    copied = tmp_path / "copied"
    build_report(ReportOptions(res, copied, load_items([items]).items, frames=cache, copy_frames=True, plots=False))
    thumbs = sorted(copied.glob("frames/*/*.jpg"))
    assert [p.name for p in thumbs] == ["frame_16.jpg"] * len(step2_rows)
    with Image.open(thumbs[0]) as im:
        assert max(im.size) <= 160
    assert '"frames":"frames"' in (copied / "data" / "index.js").read_text()
