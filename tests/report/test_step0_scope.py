"""Step 0's outcome (``--step0`` of report, export, probe, audit) names items as the screening does:
an item is its benchmark's, so a duplicate step 0 removed from one benchmark leaves another
benchmark's item of the same id alone, and what ``screen --keep`` screened is what they count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchcheck.items import load_items
from benchcheck.report.source import read_step0
from scripted_pool import cli

FLAT = [{"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3}}]  # nothing removed at step 1


def _rows(bench: str, n: int, copy_of_first: bool) -> list[dict[str, Any]]:
    """``q0``..``q{n-1}`` of ``bench``; with ``copy_of_first`` the last is an exact copy of ``q0``."""
    rows = [{"item_id": f"q{i}", "bench": bench, "question": f"{bench}: which colour is object {i}?",
             "options": [f"red {i}", f"blue {i}", f"green {i}", f"white {i}"], "answer": i % 4} for i in range(n)]
    if copy_of_first:
        rows[-1] = {**rows[0], "item_id": f"q{n - 1}"}
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _ok(*args: str) -> str:
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def shared_ids(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Benchmarks A and B number their items alike (``q0``..``q5``), so each is loaded, deduplicated
    and screened on its own, into one results folder: ``benchcheck dedup`` over A removes A's ``q5``
    (a copy of A's ``q0``); B's ``q5`` is no copy of anything."""
    root = tmp_path_factory.mktemp("step0_shared_ids")
    a = _write(root / "A" / "A.jsonl", _rows("A", 6, True))
    b = _write(root / "B" / "B.jsonl", _rows("B", 6, False))
    step0 = root / "step0_A"
    _ok("dedup", "--items", str(a), "--out", str(step0), "--model", "minilm", "--device", "cpu", "--quiet")
    rules = root / "rules.json"
    rules.write_text(json.dumps(FLAT))
    res = root / "results"
    _ok("screen", "--items", str(a), "--step", "1", "--results", str(res), "--engine", "scripted", "--rules",
        str(rules), "--keep", str(step0 / "step0_kept.parquet"), "--no-progress")
    _ok("screen", "--items", str(b), "--step", "1", "--results", str(res), "--engine", "scripted", "--rules",
        str(rules), "--no-progress")
    return {"A": a, "B": b, "step0": step0, "results": res, "root": root}


def _exported(w: dict[str, Path], bench: str, out: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    """export's note lines and ``{id: removed_at}`` of the benchmark's exported items."""
    err = _ok("export", "--results", str(w["results"]), "--items", str(w[bench]), "--format", "inspect", "--out",
              str(out), "--chain", "1", *extra)
    label = "removed" if "--removed" in extra else "kept"
    path = out / f"{bench}_{label}.inspect.jsonl"
    got = {(s := json.loads(x))["id"]: s["metadata"]["removed_at"] for x in path.read_text().splitlines()} \
        if path.exists() else {}
    return err, got


def test_a_duplicate_of_one_benchmark_is_not_another_benchmarks_item(shared_ids: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    removed = [json.loads(x) for x in (shared_ids["step0"] / "step0_removed.jsonl").read_text().splitlines()]
    assert [(r["bench"], r["item_id"]) for r in removed] == [("A", "q5")]

    # B was screened whole: its q5 is kept, not removed at step 0
    err, kept = _exported(shared_ids, "B", tmp_path / "b", "--step0", str(shared_ids["step0"]))
    assert set(kept) == {f"q{i}" for i in range(6)} and "6 kept items" in err, err
    # A's own copy is still removed at step 0
    _, gone = _exported(shared_ids, "A", tmp_path / "a_removed", "--step0", str(shared_ids["step0"]), "--removed")
    assert gone == {"q5": 0}

    step0 = read_step0(shared_ids["step0"])
    assert list(step0.removed(load_items([shared_ids["A"]]).items)) == ["q5"]
    assert step0.removed(load_items([shared_ids["B"]]).items) == {}


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """C and D loaded together; ``benchcheck dedup`` ran over C alone (it removes C's ``q5``, a copy
    of C's ``q0``), so D, whose ``q3`` copies its ``q0``, was never deduplicated. A text kept list of
    C's kept ids names no benchmark."""
    root = tmp_path_factory.mktemp("step0_partial")
    c = _write(root / "items" / "C.jsonl", [{**r, "item_id": f"c{i}"} for i, r in enumerate(_rows("C", 6, True))])
    _write(root / "items" / "D.jsonl", [{**r, "item_id": f"d{i}"} for i, r in enumerate(_rows("D", 4, True))])
    step0 = root / "step0_C"
    _ok("dedup", "--items", str(c), "--out", str(step0), "--model", "minilm", "--device", "cpu", "--quiet")
    text = root / "kept.txt"
    text.write_text("".join(f"c{i}\n" for i in range(5)))
    rules = root / "rules.json"
    rules.write_text(json.dumps(FLAT))
    return {"items": root / "items", "step0": step0, "kept": step0 / "step0_kept.parquet", "text": text,
            "rules": rules, "root": root}


@pytest.mark.parametrize("kept", ["kept", "text"])
def test_a_kept_list_removes_nothing_of_a_benchmark_dedup_never_read(partial: dict[str, Path], kept: str,
                                                                     tmp_path: Path) -> None:
    res = tmp_path / "results"
    screen = ("screen", "--items", str(partial["items"]), "--step", "1", "--results", str(res), "--engine",
              "scripted", "--rules", str(partial["rules"]), "--keep", str(partial[kept]), "--no-progress")
    plan = _ok(*screen, "--plan-only")
    assert "NOT_KEPT=1" in plan.splitlines() and "REMAINING_TOTAL=9" in plan.splitlines(), plan
    assert "D: no item in the step-0 kept list (--keep), so not deduplicated: screened whole" in plan
    _ok(*screen)
    _ok("assemble", "--items", str(partial["items"]), "--results", str(res), "--chain", "1", "--keep",
        str(partial[kept]))
    assert "Items: 9;" in (res / "pool_summary.md").read_text()
    # the dedup folder too (its step0_removed.jsonl names no item of D; its kept list says D was never read)
    for step0 in (partial[kept], *([partial["step0"]] if kept == "kept" else [])):
        _report_says_d_was_not_deduplicated(partial, res, step0, tmp_path / "report")
    err = _ok("export", "--results", str(res), "--items", str(partial["items"]), "--format", "inspect", "--out",
              str(tmp_path / "kept"), "--chain", "1", "--step0", str(partial[kept]))
    assert "9 kept items" in err and "pending" not in err, err
    assert ("note: not deduplicated: D (4 items). The dedup run behind --step0 never read it, so step 0 decided "
            "nothing of it and the chain screened it whole, as screen --keep does.") in err.splitlines(), err
    assert len((tmp_path / "kept" / "D_kept.inspect.jsonl").read_text().splitlines()) == 4
    err = _ok("export", "--results", str(res), "--items", str(partial["items"]), "--format", "inspect", "--out",
              str(tmp_path / "removed"), "--chain", "1", "--step0", str(partial[kept]), "--removed")
    assert "1 removed item" in err, err
    assert not (tmp_path / "removed" / "D_removed.inspect.jsonl").exists()


def _report_says_d_was_not_deduplicated(partial: dict[str, Path], res: Path, step0: Path, out: Path) -> None:
    """Step 0 looked at C's 6 items and removed 1; D's 4 it never read: the funnel counts them apart
    and names D, D's page says so in its step-0 row, and the chain screened all 9 others."""
    _ok("report", "--results", str(res), "--items", str(partial["items"]), "--out", str(out), "--chain",
        "1", "--step0", str(step0), "--no-progress", "--no-plots")
    html = (out / "index.html").read_text()
    funnel = html[html.index('id="funnel"'):][:1500]
    assert "<tr><td>0 duplicates (4 items not deduplicated)</td><td>6</td><td>1</td><td>5</td>" in html, funnel
    assert "<tr><td>1 blind</td><td>9</td>" in html
    assert ('id="not-deduplicated">Not deduplicated: D (4 items). The dedup run behind --step0 never read it, so '
            "step 0 decided nothing of it and the chain screened it whole, as screen --keep does.</p>") in html, funnel
    d = (out / "bench" / "D.html").read_text()
    assert '<tr class="not-deduplicated"><td>0 duplicates</td><td colspan="7">not deduplicated' in d, d
    c = (out / "bench" / "C.html").read_text()
    assert "<tr><td>0 duplicates</td><td>6</td><td>1</td>" in c and "not deduplicated" not in c


def test_the_funnel_figure_draws_the_items_step_0_never_read(tmp_path: Path) -> None:
    """Step 0's bar is as long as the items in: those of a benchmark never deduplicated are a segment
    of their own, never "kept" by a step that did not look at them."""
    from benchcheck.report import plots, stats
    from benchcheck.report.source import step0_row

    summary = [step0_row("C", 6, 1), step0_row("D", 4, 0, deduplicated=False)]
    funnel = stats.funnel(summary)
    assert {k: funnel[0][k] for k in ("screened", "removed", "kept", "not_deduplicated")} == \
        {"screened": 6, "removed": 1, "kept": 5, "not_deduplicated": 4}
    assert stats.not_deduplicated(summary) == {"D": 4}
    svg = plots.funnel_figure(tmp_path / "funnel.svg", funnel, {0: "duplicates"}).read_text()
    assert "not deduplicated" in svg
