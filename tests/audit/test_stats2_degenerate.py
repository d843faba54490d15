"""``benchcheck audit`` on inputs outside the ordinary case: rows with NaN or infinite log-probs,
a benchmark of one video, golds the permutation null cannot move. Each must give an honest
answer (a skipped row, the whole range, "cannot tell"), never a traceback or a confident number."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from pathlib import Path

from audit_synth import SimModel, make_items, run_step, write_items

from benchcheck.items import Item

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def _audit(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BIN, "audit", "--results", str(tmp_path / "results"), "--items",
                           str(tmp_path / "items"), "--out", str(tmp_path / "audit"), "--rounds", "100", *extra],
                          capture_output=True, text=True, timeout=300)


def _world(tmp_path: Path, n: int = 40, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    items = make_items("Deg", n, 4, rng)
    write_items(tmp_path / "items" / "Deg.jsonl", items)
    content = {it.item_id: [rng.gauss(0, 1.2) + (4.0 if j == it.answer and rng.random() < 0.2 else 0.0)
                            for j in range(4)] for it in items}
    model = SimModel("sim", noise=0.5, rng=random.Random(seed + 1))
    for step in (1, 4):
        run_step(tmp_path / "results", step, items, model, content)
    return [it.item_id for it in items]


def _rewrite(path: Path, change: dict[str, object]) -> None:
    """Replace fields of the first row (json writes NaN / Infinity as Python's json reads them)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0].update(change)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_rows_with_nan_or_infinite_log_probs_are_skipped_not_a_crash(tmp_path: Path) -> None:
    ids = _world(tmp_path)
    s1, s4 = tmp_path / "results" / "step1" / "Deg.jsonl", tmp_path / "results" / "step4" / "Deg.jsonl"
    first1 = json.loads(s1.read_text().splitlines()[0])
    lp1 = [list(x) for x in first1["lp"]]
    lp1[0][1] = float("nan")
    _rewrite(s1, {"lp": lp1})
    first4 = json.loads(s4.read_text().splitlines()[0])
    lp4 = list(first4["lp"])
    lp4[1] = float("-inf")
    _rewrite(s4, {"lp": lp4, "lp_exact": [float("inf")] * len(lp4)})
    second4 = json.loads(s4.read_text().splitlines()[1])
    rows4 = [json.loads(line) for line in s4.read_text().splitlines()]
    rows4[1]["lp_exact"] = [float("-inf"), *second4["lp"][1:]]  # an exact score alone non-finite: dropped alone
    s4.write_text("".join(json.dumps(r) + "\n" for r in rows4))
    p = _audit(tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    rows = list(csv.DictReader((tmp_path / "audit" / "audit_items.csv").open()))
    at = {(r["step"], r["item_id"]) for r in rows}
    assert ("1", ids[0]) not in at and ("4", ids[0]) not in at  # the rows with no finite letters
    assert len(rows) == 2 * len(ids) - 2
    second = next(r for r in rows if r["step"] == "4" and r["item_id"] == ids[1])
    assert second["removed_exact"] == ""  # its lp_exact was not usable; its lp still is


def _set_video(results: Path, video: str) -> None:
    for path in results.glob("step*/*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "video_id": video}) + "\n" for r in rows))


def test_one_video_rate_interval_is_the_whole_range(tmp_path: Path) -> None:
    """Every item from one video: nothing estimates the spread between videos, so the removal rate's
    interval is [0, 1] (it took the items as independent: 88.5 % coverage of a 0.2 rate at ICC 0.6)."""
    _world(tmp_path, n=30)
    _set_video(tmp_path / "results", "the-only-video")
    p = _audit(tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "audit" / "audit_thresholds.csv").open()))
    assert rows and all((float(r["rate_lo"]), float(r["rate_hi"])) == (0.0, 1.0) for r in rows)
    # Two videos: an interval again, holding the rate.
    _set_video(tmp_path / "results", "")
    for path in (tmp_path / "results").glob("step*/*.jsonl"):
        rows2 = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "video_id": f"v{i % 2}"}) + "\n" for i, r in enumerate(rows2)))
    assert _audit(tmp_path).returncode == 0
    rows = list(csv.DictReader((tmp_path / "audit" / "audit_thresholds.csv").open()))
    assert any(float(r["rate_hi"]) - float(r["rate_lo"]) < 1.0 for r in rows)
    assert all(float(r["rate_lo"]) <= float(r["rate"]) <= float(r["rate_hi"]) for r in rows)


def _steps_world(tmp_path: Path, items: list[Item], content: dict[str, list[float]], steps: tuple[int, ...],
                 prior: list[float] | None = None) -> None:
    write_items(tmp_path / "items" / f"{items[0].bench}.jsonl", items)
    model = SimModel("sim", prior=prior, noise=0.3, rng=random.Random(5))
    for step in steps:
        run_step(tmp_path / "results", step, items, model, content)


def _headline(tmp_path: Path) -> str:
    p = _audit(tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_a_permutation_null_that_cannot_move_the_golds_does_not_call_the_removals_noise(tmp_path: Path) -> None:
    """Permuting the golds of one item, or of items whose golds all sit at one option, gives back the
    observed removals whatever they rest on: a benchmark of shortcuts was told 'treat them as noise'."""
    rng = random.Random(1)
    # One item, a strong shortcut, steps 1 and 4.
    one = make_items("One", 1, 4, rng)
    _steps_world(tmp_path / "one", one, {one[0].item_id: [6.0 if j == one[0].answer else 0.0 for j in range(4)]},
                 (1, 4))
    out = _headline(tmp_path / "one")
    assert "removed 1/1" in out and "treat them as noise" not in out
    # The conditioned null shuffles the options at step 1, so it expects the one item's removal
    # there only by a quarter: the headline says too few items to tell, not that the null expects
    # all of them.
    assert "no removal is shown to rest on a shortcut (too few items" in out
    # 50 items, every gold at A, every item a shortcut, a single-forward step.
    allA = [Item(f"AllA_{i}", "AllA", f"question {i}?", tuple(f"option {j} of {i}" for j in range(4)), 0)
            for i in range(50)]
    _steps_world(tmp_path / "alla", allA, {it.item_id: [6.0, 0.0, 0.0, 0.0] for it in allA}, (4,))
    out = _headline(tmp_path / "alla")
    assert "removed 50/50" in out and "treat them as noise" not in out
    assert "cannot tell chance from shortcuts" in out
    null = next(csv.DictReader((tmp_path / "alla" / "audit" / "audit_null.csv").open()))
    assert float(null["null_if_shortcuts"]) == 1.0 == float(null["null_rate"])
    # Control: a model that always answers A on golds spread over the options is noise, and is said to be.
    spread = make_items("Spread", 80, 4, rng)
    _steps_world(tmp_path / "spread", spread, {it.item_id: [0.0] * 4 for it in spread}, (4,),
                 prior=[0.9, 0.04, 0.03, 0.03])
    out = _headline(tmp_path / "spread")
    assert "treat them as noise" in out and "cannot tell" not in out


def test_a_deterministic_engine_gives_certain_decisions_without_warnings(tmp_path: Path) -> None:
    """No noise: the four permutations' margins agree up to rounding; every decision is certain and
    the audit prints no numpy warning (a 'divide by zero encountered in log' reached the terminal)."""
    rng = random.Random(2)
    items = make_items("Det", 30, 4, rng)
    write_items(tmp_path / "items" / "Det.jsonl", items)
    content = {it.item_id: [rng.gauss(0, 1.5) for _ in range(4)] for it in items}
    for step in (1, 4):
        run_step(tmp_path / "results", step, items, SimModel("det", noise=0.0), content)
    p = _audit(tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Warning" not in p.stderr, p.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "audit" / "audit_items.csv").open()))
    assert rows and all(float(r["confidence"]) == 1.0 for r in rows)
