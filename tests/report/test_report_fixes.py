"""Issue 38's report fixes that need no browser: random weights told by the checkpoint's marker
(never by the name), one banner line per kind, unparsed and NA sweep rows counted with their
reasons, the audit tables summarized and linked (one section per CSV, new ones included), and
figures with legible text, axes at the ladder's rungs and whole-number counts."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from benchcheck.engines.marker import MARKER, is_random_revision, read_marker
from benchcheck.report import plots
from benchcheck.report.audit import TOP_ROWS, link_tables, read_audit
from benchcheck.report.options import ReportOptions
from benchcheck.report.provenance import StepLine, random_weights, warnings
from benchcheck.report.site import build_report
from benchcheck.report.source import sweep_revisions
from benchcheck.report.stats import wilson


def test_tiny_builder_marks_its_folder_and_the_hf_engine_records_it(tiny_model: Path) -> None:
    rec = read_marker(tiny_model)
    assert rec is not None and rec["builder"] == "tiny" and rec["seed"] == 0
    assert json.loads((tiny_model / "config.json").read_text())["benchcheck_random_weights"]["random_weights"]
    from benchcheck.engines.hf.engine import HFEngine

    engine = HFEngine(tiny_model, device="cpu", served_name="any-label")  # the label says nothing
    assert engine.revision == "random-weights:tiny-seed0" and is_random_revision(engine.revision)


def test_random_weights_come_from_the_checkpoint_not_the_name(tmp_path: Path) -> None:
    real = tmp_path / "TinyLLaVA-random-tiny"  # a real checkpoint whose name has both words
    real.mkdir()
    (real / "config.json").write_text(json.dumps({"model_type": "llava"}))
    assert not random_weights(str(real), [None])
    assert not random_weights("tiny-random-model", [None])  # a name alone, nothing on disk
    marked = tmp_path / "my-model"
    marked.mkdir()
    (marked / MARKER).write_text(json.dumps({"random_weights": True, "builder": "tiny", "seed": 1}))
    assert random_weights(str(marked), [None])
    assert random_weights("my-model", [None], bases=[tmp_path])  # a relative name under the results' parent
    copied = tmp_path / "copied"  # only the files from_pretrained reads were copied: the config says it
    copied.mkdir()
    (copied / "config.json").write_text(json.dumps({"benchcheck_random_weights": {"random_weights": True}}))
    assert random_weights(str(copied), [None])
    assert random_weights("Qwen/Qwen3-VL-8B-Instruct", ["random-weights:tiny-seed0"])  # the rows' revision


def line(step: int, engine: str, model: str, revision: str | None = None) -> StepLine:
    values = {"engine": [engine], "model": [model], "revision": [revision] if revision else []}
    return StepLine(step, f"s{step}", 10, values, None, None, "Qwen/Qwen3-VL-8B-Instruct", "abc")


def test_one_banner_line_per_kind() -> None:
    lines = [line(s, "reference", "reference:rules") for s in range(1, 7)]
    assert warnings(lines, []) == ["made by the rule-based reference engine (no model: decisions follow fixed rules), "
                                   "not a model's judgement: steps 1-6"]
    # a side run on a random-weight checkpoint (its run specs keep the revision) and a real model
    # that is not the protocol's, named like a tiny one: three kinds, three lines
    lines = [line(1, "reference", "reference:rules"), line(2, "hf", "TinyLLaVA"), line(3, "hf", "TinyLLaVA")]
    log = [{"step": s, "engine": "hf", "model": "label", "results": "/runs/tiny"} for s in (1, 2, 4)]
    rev = {"model": {"name": "label", "revision": "random-weights:tiny-seed0"}}
    specs = {"/runs/tiny": dict.fromkeys((1, 2, 4), rev)}
    out = warnings(lines, log, specs)
    assert len(out) == 3, out
    assert out[0].endswith("step 1")
    assert out[2] == "model 'label' is a RANDOM-WEIGHT model (its checkpoint says so): its decisions mean nothing: " \
                     "steps 1, 2, 4 of /runs/tiny"
    assert out[1] == "model TinyLLaVA is not the protocol's Qwen/Qwen3-VL-8B-Instruct: steps 2, 3"
    assert not any("RANDOM" in w and "TinyLLaVA" in w for w in out)


SWEEP_HEADER = ["bench", "item_id", "condition", "status", "pred", "gold", "correct", "parse", "video_id", "meta"]


def write_sweep(folder: Path) -> None:
    rows = []
    for i in range(6):
        vid = f"v{i}"
        rows.append(["B", f"B_{i}", "v_1", "unparsed", "", "A", "0", "no_rule" if i < 4 else "empty", vid, "{}"])
        rows.append(["B", f"B_{i}", "v_8_s224", "ok", "A", "A", "1", "letter", vid, "{}"])
        if i < 3:  # half the videos are too short for 128 frames
            rows.append(["B", f"B_{i}", "v_128_s224", "NA", "", "A", "", "", vid, json.dumps({"reason": "too_short"})])
        else:
            rows.append(["B", f"B_{i}", "v_128_s224", "ok", "B", "A", "0", "letter", vid, "{}"])
    (folder / "results").mkdir(parents=True)
    with (folder / "results" / "conditions_results.csv").open("w", newline="") as f:
        csv.writer(f).writerows([SWEEP_HEADER, *rows])


def test_sweep_page_counts_unparsed_and_na_with_reasons(tmp_path: Path) -> None:
    write_sweep(tmp_path / "sweep")
    (tmp_path / "results").mkdir()
    built = build_report(ReportOptions(tmp_path / "results", tmp_path / "report", sweep=tmp_path / "sweep",
                                       plots=False))
    html = (built.out / "sweep.html").read_text()
    assert "Unparsed replies (no rule could read the answer; scored as wrong): <b>6 (no_rule 4, empty 2)</b>" in html
    assert "NA (the condition could not apply to the item; not scored): <b>3 (too_short 3)</b>" in html
    row = re.search(r'<tr class="all-unparsed"><td>v_1</td>.*?</tr>', html, re.S)
    assert row and "every reply unparsed: this is no accuracy" in row.group(0)
    row = re.search(r"<tr><td>v_128_s224</td><td>3</td>.*?</tr>", html, re.S)  # 3 scored, 3 NA
    assert row and "3 (too_short 3)" in row.group(0)


def write_audit(folder: Path) -> None:
    folder.mkdir()
    with (folder / "audit_thresholds.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "step", "threshold", "items", "removed", "rate"])
        for b in range(8):
            for step in (1, 2, 3):
                for t in range(31):
                    thr = round(0.1 * t, 4) if t != 7 else 0.6931
                    removed = max(0, 20 - 2 * t - step)
                    w.writerow([f"Bench{b}", step, thr, 40, removed, removed / 40])
    with (folder / "audit_null.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "step", "items", "removed", "observed_rate", "null_rate", "null_lo", "null_hi",
                    "est_false_removals", "rule"])
        for b in range(8):
            for step in (1, 2, 3):
                w.writerow([f"Bench{b}", step, 40, b + step, (b + step) / 40, 0.05, 0.0, 0.1, (b * step) % 5,
                            "removed when argmax == gold and margin > log 2 (the protocol's rule, said once)"])
    (folder / "audit_pvalues.csv").write_text("bench,step,p,q\n" + "".join(f"B{i},1,0.0{i},0.1\n" for i in range(30)))


def test_audit_tables_are_summarized_and_linked(tmp_path: Path) -> None:
    write_audit(tmp_path / "audit")
    data = read_audit(tmp_path / "audit")
    by = {t.name: t for t in data.tables}
    assert list(by) == ["audit_null.csv", "audit_thresholds.csv", "audit_pvalues.csv"]  # known first, then new
    null = by["audit_null.csv"]
    assert null.total == 24 and len(null.rows) == TOP_ROWS and "rule" not in null.header
    assert null.notes == ("rule: removed when argmax == gold and margin > log 2 (the protocol's rule, said once)",)
    est = [float(r[null.header.index("est_false_removals")]) for r in null.rows]
    assert est == sorted(est, reverse=True) and est[0] == 4.0  # the rows with the most chance removals
    thr = by["audit_thresholds.csv"]
    assert thr.total == 8 * 3 * 31 and thr.header == ["step", "0", "0.5", "log 2", "1", "1.5", "2", "3"]
    assert [r[0] for r in thr.rows] == ["1", "2", "3"]
    assert thr.rows[0][1] == f"{100 * 19 / 40:.1f}%" and thr.rows[0][3] == f"{100 * 5 / 40:.1f}%"
    new = by["audit_pvalues.csv"]
    assert new.title == "Audit pvalues" and len(new.rows) == TOP_ROWS and new.total == 30
    out = tmp_path / "site"
    link_tables(data, out, "audit/main")
    for t in data.tables:
        assert t.href == f"audit/main/{t.name}"
        assert (out / t.href).read_bytes() == (tmp_path / "audit" / t.name).read_bytes()


def svg_texts(path: Path) -> list[tuple[float, str]]:
    """(font size, text) of every text element of a matplotlib SVG (text kept as text)."""
    found = re.findall(r'<text style="font-size: ([\d.]+)px[^>]*>([^<]*)</text>', path.read_text())
    return [(float(size), text) for size, text in found]


def test_figures_are_svg_with_legible_text_rung_axes_and_whole_counts(tmp_path: Path) -> None:
    ladder = {"short side (32 frames)": [(168.0, wilson(3, 10)), (224.0, wilson(5, 10)), (448.0, wilson(8, 10)),
                                         (720.0, wilson(9, 10))],
              "frames (224 px)": [(8.0, wilson(4, 10)), (32.0, wilson(5, 10)), (128.0, wilson(7, 10))]}
    plane = [(8.0, 224.0, 0.4), (32.0, 168.0, 0.3), (32.0, 448.0, 0.8), (128.0, 224.0, 0.7)]
    texts = svg_texts(plots.ladder_figure(tmp_path / "ladder.svg", "B", ladder, plane))
    assert texts and min(size for size, _ in texts) >= plots.FONT
    words = [t for _, t in texts]
    for rung in ("168", "224", "448", "720", "8", "32", "128"):
        assert rung in words
    assert not any("^" in w or "mathdefault" in w for w in words)  # no powers of 2 (matplotlib's 2^{k})
    funnel = {0: {"screened": 7, "removed": 1, "kept": 6, "failed": 0, "pending": 0, "not_screened": 0},
              1: {"screened": 6, "removed": 2, "kept": 3, "failed": 0, "pending": 1, "not_screened": 0}}
    texts = svg_texts(plots.funnel_figure(tmp_path / "funnel.svg", funnel, {0: "duplicates", 1: "blind"}))
    ticks = [t for _, t in texts if re.fullmatch(r"[\d.]+", t)]
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks)  # whole items only
    assert "0 duplicates" in [t for _, t in texts]
    assert "failed" not in [t for _, t in texts]  # no legend entry for what no step has


@pytest.mark.parametrize("labels", [["A", "B"], [f"VeryLongBenchmarkName{i}" for i in range(12)]])
def test_svg_bars_fit_every_label(labels: list[str]) -> None:
    """The inline bars widen or slant for their labels; the estimate never cuts one (the browser
    test measures the real text)."""
    from benchcheck.report import svg

    chart = svg.bars("t", labels, [("null", "#999", [0.1] * len(labels)), ("observed", "#00f", [0.5] * len(labels))],
                     ymax=1.0)
    width = float(re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', chart).group(1))  # type: ignore[union-attr]
    for lab in labels:
        assert f">{lab}</text>" in chart
    assert width <= svg.MAX_W
    assert ('rotate(-35' in chart) == (len(labels) > 2)


def test_a_sweep_on_a_random_checkpoint_moved_since_is_named_by_its_run_specs(tmp_path: Path) -> None:
    # The checkpoint folder the sweep's run log names is gone; its run specs kept the revision.
    results = tmp_path / "sweep" / "results"
    for cond in ("v_1", "v_blind"):
        (results / "sweep_rows" / cond).mkdir(parents=True)
        (results / "sweep_rows" / cond / "run_spec.json").write_text(json.dumps(
            {"model": {"name": "/gone/tiny", "revision": "random-weights:tiny-seed0"}}))
    (results / "sweep_rows" / "v_8").mkdir()
    (results / "sweep_rows" / "v_8" / "run_spec.json").write_text("{not json")
    revs = sweep_revisions(results)
    assert revs == ["random-weights:tiny-seed0", "random-weights:tiny-seed0"]
    log = [{"engine": "hf", "model": "/gone/tiny"}]
    assert warnings([], [], sweep_log=log) == []  # the folder alone no longer tells
    out = warnings([], [], sweep_log=log, sweep_revisions=revs)
    assert out == ["model '/gone/tiny' is a RANDOM-WEIGHT model (its checkpoint says so): its decisions mean "
                   "nothing: the sweep"]
