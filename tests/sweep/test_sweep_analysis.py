"""The analysis: constructed "pixels" and "frames" benchmarks through the real runner with the
scripted engine's frame-keyed rules, then ``benchcheck sweep analyze``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sweep_helpers import item, stored_video, write_items, write_rules

from benchcheck.cli import main
from benchcheck.items import load_items
from benchcheck.sweep.analysis import Interval, Settings, analyze, verdict
from benchcheck.sweep.cli_run import SweepArgs, run
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import SweepPaths, read_csv

CONDS = "v_8_s224,v_32,v_32_s168,v_32_s448,v_128_s224"
# Gold is A everywhere. [P]: right only at short side >= 300; [F]: right only with >= 100 frames.
RULES = [{"match": r"\[P\]", "images": {"short_min": 300}, "reply": "Answer: A"},
         {"match": r"\[P\]", "reply": "Answer: B"},
         {"match": r"\[F\]", "images": {"count_min": 100}, "reply": "The answer is (A)."},
         {"match": r"\[F\]", "reply": "B"}]


def test_constructed_benchmarks_get_the_pixels_and_frames_verdicts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    rows = []
    # 7 videos: 6 is the smallest count whose permutation p-value can reach 1/64 < 0.025, but with 6
    # of 6 items gaining the pixels effect's score interval (t on 5 df) still reaches 0 (decision 136)
    for v in range(7):
        big = stored_video(store, f"big{v}", 40, 800, 450)  # stored at 450: v_32_s448 reuses v_32
        many = stored_video(store, f"many{v}", 140, 320, 180)
        rows += [item("PixelsBench", v, big, question="[P] what colour?")]
        rows += [item("FramesBench", v, many, question="[F] what order?")]
    loaded = load_items(write_items(tmp_path / "items", rows))
    paths = SweepPaths.under(tmp_path / "results")
    rules = write_rules(tmp_path / "rules.json", RULES)
    run(SweepArgs(loaded.items, str(store), paths, CONDS, engine=SweepEngine("scripted", rules=str(rules)),
                  decode_workers=0, progress=False), lambda s: None)
    # At the default minimum of 10 videos, 6 videos decide nothing, and say so.
    strict = {v.bench: v for v in analyze(read_csv(paths.csv), Settings(n_perm=500)).verdicts}
    assert all(v.verdict == "undetermined" and "7 videos < 10" in v.reason for v in strict.values())
    result = analyze(read_csv(paths.csv), Settings(n_perm=500, min_videos=7, min_items=7))
    by = {v.bench: v for v in result.verdicts}
    assert by["PixelsBench"].verdict == "pixels", by["PixelsBench"].reason
    assert by["PixelsBench"].pixels_hi == "v_32_s448"
    px = by["PixelsBench"].pixels
    assert px is not None and px.est == 1.0 and px.n == 7 and px.n_videos == 7 and px.lo < 1.0  # never zero-width
    assert by["FramesBench"].verdict == "frames"
    fr = by["FramesBench"].frames
    assert fr is not None and fr.est == 1.0 and fr.n == 7 and fr.lo < 1.0
    assert by["FramesBench"].pixels is not None and by["FramesBench"].pixels.est == 0.0

    out = tmp_path / "analysis"
    res = CliRunner().invoke(main, ["sweep", "analyze", "--results", str(paths.results), "--out", str(out),
                                    "--n-perm", "300", "--min-videos", "7", "--min-items", "7"])
    assert res.exit_code == 0, res.output
    md = (out / "sweep_summary.md").read_text()
    assert "**Verdict rule.**" in md and "| PixelsBench |" in md and "**pixels**" in md and "**frames**" in md
    csv_text = (out / "sweep_summary.csv").read_text()
    assert "pixels_effect" in csv_text and "paired_difference" in csv_text
    for png in ("sweep_overview.png", "sweep_PixelsBench.png", "sweep_FramesBench.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _rows(bench: str, cond: str, correct: list[int], per_video: int) -> list[dict[str, object]]:
    return [{"bench": bench, "item_id": f"i{j}", "condition": cond, "status": "ok", "correct": c,
             "video_id": f"v{j // per_video}"} for j, c in enumerate(correct)]


def test_intervals_are_clustered_by_video() -> None:
    # Same 40 answers; with 10 items per video (correlated within a video) the interval is wider.
    correct = [1] * 10 + [0] * 10 + [1] * 10 + [0] * 10
    indep = analyze(_rows("B", "v_32", correct, 1)).conditions[0].accuracy
    clustered = analyze(_rows("B", "v_32", correct, 10)).conditions[0].accuracy
    assert indep.est == clustered.est == 0.5
    assert (clustered.hi - clustered.lo) > 1.5 * (indep.hi - indep.lo)


def test_verdict_rule_and_undetermined() -> None:
    up, flat, wide = Interval(0.2, 0.1, 0.3, 50), Interval(0.0, -0.01, 0.01, 50), Interval(0.0, -0.3, 0.3, 5)
    assert verdict(up, up) == "both" and verdict(up, flat) == "pixels" and verdict(flat, up) == "frames"
    assert verdict(flat, flat) == "neither"
    assert verdict(wide, flat) == "undetermined" and verdict(None, up) == "undetermined"
    # An interval above 0 does not help without the test: p above alpha / 2.
    assert verdict(up, flat, p_pixels=0.03) == "undetermined"
    assert verdict(flat, flat, s=Settings(margin=0.005)) == "undetermined"


def test_unparsed_counts_as_wrong_and_na_is_left_out() -> None:
    rows = [{"bench": "B", "item_id": "a", "condition": "c", "status": "unparsed", "correct": 0, "video_id": "v"},
            {"bench": "B", "item_id": "b", "condition": "c", "status": "ok", "correct": 1, "video_id": "w"},
            {"bench": "B", "item_id": "d", "condition": "c", "status": "NA", "correct": "", "video_id": "x"}]
    s = analyze(rows, Settings(n_perm=50)).conditions[0]
    assert s.accuracy.est == 0.5 and s.accuracy.n == 2 and s.unparsed == 1 and s.na == 1
    assert json.dumps(s.accuracy.est)


def test_an_effect_whose_rows_are_all_na_says_so() -> None:
    # Every video too short for the frames ladder: its rows are NA, not absent.
    rows = _rows("B", "v_8_s224", [1, 0] * 10, 1)
    for cond in ("v_128_s224", "v_fps1_s224"):
        rows += [{**r, "condition": cond, "status": "NA", "correct": ""} for r in _rows("B", cond, [0] * 20, 1)]
    v = analyze(rows, Settings(n_perm=50)).verdicts[0]
    assert v.verdict == "undetermined"
    assert "no answered rows for" in v.reason and "(40 NA: videos too short for the condition)" in v.reason
    # Rows simply missing keep the plain reason.
    plain = analyze(_rows("B", "v_8_s224", [1, 0] * 10, 1), Settings(n_perm=50)).verdicts[0]
    assert "no answered rows for" in plain.reason and "NA" not in plain.reason
