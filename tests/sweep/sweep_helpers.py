"""Helpers of the sweep tests: stored videos (real mp4 + meta.json), item files, rules."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic
from benchcheck.video.meta import VideoMeta, video_dir
from benchcheck.video.synth import make_test_video


def stored_video(store: Path, video_id: str, n_frames: int, width: int, height: int, fps: float = 2.0) -> str:
    """A normalized-store entry: an H.264 video.mp4 of ``n_frames`` and its meta.json."""
    d = video_dir(store, video_id)
    if (d / "meta.json").is_file():
        return video_id
    make_test_video(d / "video.mp4", n_frames, fps=fps, width=width, height=height, gop=32, preset="ultrafast")
    ts = [i / fps for i in range(n_frames)]
    meta = VideoMeta(content_hash=video_id, width=width, height=height, duration=n_frames / fps, fps=fps,
                     n_frames=n_frames, timestamps=ts, too_short=n_frames <= 32)
    write_json_atomic(d / "meta.json", meta.to_json())
    return video_id


def item(bench: str, n: int, video_id: str | None, question: str = "What happens?", answer: int = 0) -> dict[str, Any]:
    return {"item_id": f"{bench}_{n}", "bench": bench, "question": question,
            "options": ["a red ball", "a blue cube", "a green cone", "a dog"], "answer": answer, "video_id": video_id}


def write_items(folder: Path, rows: list[dict[str, Any]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["bench"], []).append(r)
    paths = []
    for bench, rs in by.items():
        p = folder / f"{bench}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rs))
        paths.append(p)
    return paths


def write_rules(path: Path, rules: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(rules))
    return path


def sweep_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``benchcheck sweep ARGS`` in a child process."""
    return subprocess.run([sys.executable, "-m", "benchcheck", "sweep", *args], capture_output=True, text=True,
                          timeout=300)


def dry_rows(common: Sequence[str]) -> dict[tuple[str, str], list[str]]:
    """``sweep dry-run``'s table: (benchmark, condition) -> its counts (todo, na, reuse, fail, ...)."""
    dry = sweep_cli("dry-run", *common)
    assert dry.returncode == 0, dry.stderr
    return {tuple(line.split()[:2]): line.split()[2:] for line in dry.stdout.splitlines()}  # type: ignore[misc]


def scripted_run(tmp: Path, common: Sequence[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """``sweep run`` with the scripted engine answering "A" to everything: the results CSV's lines
    and the failures logged."""
    rules = write_rules(tmp / "rules.json", [{"match": "", "reply": "The answer is A."}])
    run = sweep_cli("run", *common, "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0",
                    "--no-progress")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    res = Path(common[list(common).index("--results") + 1])
    written = (res / "conditions_results.csv").read_text().splitlines()
    failures = [json.loads(x) for x in (res / "data" / "logs" / "failures.jsonl").read_text().splitlines()]
    return written, failures


# A mixed pool over the stored videos of the sweep tests: two benches, an item without a video, one
# the scripted engine cannot answer ("unsure"), one named by a store key.
RULES = [{"match": "unsure", "reply": "I cannot tell from these frames."},
         {"match": "", "reply": "The answer is A."}]


def mixed_items(tmp: Path) -> list[Path]:
    rows = [item("Alpha", 0, "long16x9"), item("Alpha", 1, "short20"), item("Alpha", 2, "s480"),
            item("Alpha", 3, "mid100", question="unsure about this one"), item("Alpha", 4, None),
            item("Alpha", 5, "k:0123456789abcdef"), item("Beta", 0, "mid100", answer=1), item("Beta", 1, "s720"),
            item("Beta", 2, "mid100", answer=2)]
    return write_items(tmp / "items", rows)


def every_readers_counts(res: Path, common: Sequence[str], tag: str) -> dict[str, dict[str, dict[str, Any]]]:
    """What each reader of ``res/conditions_results.csv`` counts per condition (one benchmark):
    ``sweep dry-run`` (``done``, ``todo``), ``sweep analyze`` (``n``, ``acc``, ``unparsed``, ``na``,
    ``errors``: its ``sweep_summary.csv``, checked against ``sweep_summary.md``), ``pack``'s report (``n``:
    items done, ``unparsed``, ``na``, ``errors``) and the HTML report's sweep page (``n`` scored, ``acc``,
    ``unparsed``, ``na``, ``errors``); ``acc`` to 0.001, as the page shows it.
    ``common``: the dry run's arguments; ``tag`` names this call's outputs."""
    import csv
    import re

    from benchcheck.report import ReportOptions, build_report

    work = res.parent / f"readers_{tag}"
    work.mkdir()
    dry = {cond: {"todo": int(v[0]), "done": int(v[6])} for (bench, cond), v in dry_rows(common).items()
           if bench not in ("bench", "TOTAL", "stale", "csv:")}
    an = sweep_cli("analyze", "--results", str(res), "--out", str(work / "analysis"), "--no-plots")
    assert an.returncode == 0, an.stderr
    analyze = {r["condition"]: {"n": int(r["n_items"]), "unparsed": int(r["unparsed"]), "na": int(r["na"]),
                                "errors": int(r["errors"]),
                                "acc": round(float(r["estimate"]), 3) if r["estimate"] else None}
               for r in csv.DictReader((work / "analysis" / "sweep_summary.csv").open()) if r["kind"] == "accuracy"}
    md = {m[0]: {"n": int(m[1]), "unparsed": int(m[2]), "na": int(m[3]), "errors": int(m[4])} for m in re.findall(
        r"^\| [^|]+ \| (\S+) \| [^|]+ \| [^|]+ \| (\d+) \| \d+ \| (\d+) \| (\d+) \| (\d+)[^|]* \|$",
        (work / "analysis" / "sweep_summary.md").read_text(), re.M)}
    assert md == {c: {k: v[k] for k in ("n", "unparsed", "na", "errors")} for c, v in analyze.items()}, md
    r = subprocess.run([sys.executable, "-m", "benchcheck", "pack", "--results", res.name, "--out",
                        str(work / "p.tar.gz")], cwd=res.parent, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "p.report.json").read_text())
    pack = {s["name"]: {"n": s["items_done"], "unparsed": s["unparsed_rows"], "na": s["na_rows"],
                        "errors": s["error_rows"]} for s in rep["stages"] if s["name"] != "all conditions"}
    (work / "screening").mkdir()
    build_report(ReportOptions(work / "screening", work / "report", None, sweep=res, plots=False))
    html = (work / "report" / "sweep.html").read_text(encoding="utf-8")
    page = {m[0]: {"n": int(m[1]), "acc": round(float(m[2]) / 100, 3) if m[2] else None, "unparsed": int(m[3]),
                   "na": int(m[4]), "errors": int(m[5])} for m in re.findall(
        r'<tr(?: class="all-unparsed")?><td>([^<]+)</td><td>(\d+)</td>\s*<td>(?:([\d.]+)%)?[^<]*</td>\s*'
        r'<td>(\d+)[^<]*</td><td>(\d+)[^<]*</td><td class="errors">(\d+)[^<]*</td></tr>', html)}
    assert page, "the sweep page shows no condition table"
    return {"dry": dry, "analyze": analyze, "pack": pack, "page": page}
