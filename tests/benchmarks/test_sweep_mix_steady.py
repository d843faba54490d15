"""``sweep_mix``'s steady estimate: each cell read over its rows after its first call in time where it
has any (the process's first visits, with their compiles and autotuning, left out), against runs whose
steady costs and first-visit extras are known (decision 111)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from benchmarks.shared.nvml import Sample
from benchmarks.sweep_mix import (
    SEED_COUNTS,
    STEADY_FROM,
    VideoClass,
    aggregate,
    call_busy,
    call_ranks,
    filler,
    mix_busy,
    round_of,
    window,
    write_items,
)

CLASSES = [VideoClass(30.0, (16, 9), 2), VideoClass(900.0, (4, 3), 1), VideoClass(2400.0, (16, 9), 1)]


def known_run(rng: np.random.Generator) -> dict[str, Any]:
    """Rows and call seconds of a run whose truth is known: every cell a steady GPU cost an
    inference and, in its first call in time only, an extra of up to 20 times it; 2-4 rounds, a
    third of the cells answered out of round order (a later round's call first, as the sweep may
    run them); a fifth of the cells cut at the budget after their first call (no steady rows); NA
    rows cost nothing. ``first``: the request ids of each cell's first call."""
    rounds = int(rng.integers(2, 5))
    steady = {(c, v.name): float(np.exp(rng.uniform(np.log(0.03), np.log(2.0))))
              for c in SEED_COUNTS for v in CLASSES}
    extra = {k: float(rng.uniform(0, 20) * s) for k, s in steady.items()}
    cut = {k for k in steady if rng.random() < 0.2}
    # Each cell's rounds in the order its calls ran; a call's end is its place in that order.
    order = {k: [int(r) for r in (rng.permutation(rounds) if rng.random() < 1 / 3 else range(rounds))]
             for k in steady}
    rows: list[dict[str, str]] = []
    calls: dict[str, tuple[float, float, int]] = {}
    class_of: dict[str, str] = {}
    first: set[str] = set()
    for r in range(rounds):
        for v in CLASSES:
            for k in range(v.count):
                iid = f"R{r:02d}_{v.name}_{k}"
                class_of[iid] = v.name
                for cond in SEED_COUNTS:
                    place = order[(cond, v.name)].index(r)
                    if place >= STEADY_FROM and (cond, v.name) in cut:
                        continue
                    cost = steady[(cond, v.name)] * rng.uniform(0.8, 1.2)
                    if place < STEADY_FROM:
                        cost += extra[(cond, v.name)]
                        first.add(f"{cond}|{iid}")
                    rows.append({"condition": cond, "item_id": iid, "status": "OK", "meta": "{}",
                                 "n_frames": "32", "prompt_tokens": "900", "infer_s": "1.0", "decode_s": "0.1"})
                    calls[f"{cond}|{iid}"] = (cost, float(place), 3)
    # A cell whose rows are NA (its condition has no frames there): free, in every round.
    for row in rows:
        if row["condition"] == "v_fps2_s224" and class_of[row["item_id"]] == CLASSES[0].name:
            row["status"] = "NA"
    return {"rows": rows, "calls": calls, "class_of": class_of, "steady": steady, "cut": cut, "extra": extra,
            "first": first}


def test_the_steady_mix_recovers_the_cells_known_costs() -> None:
    for seed in range(40):
        run = known_run(np.random.default_rng(seed))
        cells, _, mix = aggregate(run["rows"], run["calls"], run["class_of"], CLASSES, STEADY_FROM)
        share = {v.name: v.count / sum(w.count for w in CLASSES) for v in CLASSES}
        truth_w = truth_t = 0.0
        got_extra = 0.0
        for c in cells:
            key = (c["condition"], c["class"])
            if c["free"]:
                assert key == ("v_fps2_s224", CLASSES[0].name) and c["weight"] == 0.0
                continue
            mine = [g for rid, (g, _, _) in run["calls"].items()
                    if rid.split("|")[0] == key[0] and run["class_of"][rid.split("|")[1]] == key[1]]
            late = [g for rid, (g, _, _) in run["calls"].items()
                    if rid.split("|")[0] == key[0] and run["class_of"][rid.split("|")[1]] == key[1]
                    and rid not in run["first"]]
            assert c["steady"] == (key not in run["cut"])
            want = float(np.mean(late)) if c["steady"] else float(np.mean(mine))
            assert abs(c["gpu_s"] - want) < 1e-12
            if c["steady"]:  # its steady rows scatter around the known cost, +-20 %
                assert 0.8 * run["steady"][key] <= c["gpu_s"] <= 1.2 * run["steady"][key]
                got_extra += sum(mine) - sum(late) - (len(mine) - len(late)) * want
            w = SEED_COUNTS[key[0]] * share[key[1]]
            truth_w, truth_t = truth_w + w, truth_t + w * want
        assert abs(mix["gpu_s"] - truth_t / truth_w) < 1e-12
        steady_w = sum(SEED_COUNTS[c] * share[v] for c, v in run["steady"]
                       if (c, v) not in run["cut"] and (c, v) != ("v_fps2_s224", CLASSES[0].name))
        assert mix["weight_steady"] == round(steady_w / truth_w, 3)
        assert abs(mix["first_extra_s"] - round(got_extra, 2)) < 0.011
        # Against the construction: each steady cell's first call's rows carried its known extra, give
        # or take the rows' scatter (+-20 % of its cost, and as much in its steady mean).
        known = [(len([r for r in run["rows"] if (r["condition"], run["class_of"][r["item_id"]]) == (c, v)
                       and f"{c}|{r['item_id']}" in run["first"]]), run["extra"][(c, v)], run["steady"][(c, v)])
                 for c, v in run["steady"] if (c, v) not in run["cut"] and (c, v) != ("v_fps2_s224", CLASSES[0].name)]
        scatter = sum(0.4 * n * g for n, _, g in known)
        assert abs(mix["first_extra_s"] - sum(n * x for n, x, _ in known)) <= scatter + 0.01


def test_first_visits_bias_the_all_rows_mix_and_not_the_steady_one() -> None:
    # Over 40 runs with no cell cut: the steady mix within 6 % of the known costs (its rows scatter
    # +-20 %; a cell of two rounds has one steady row), the all-rows mix above them by the first
    # visits' extra (decision 111 has the sizes).
    steady_err, all_err = [], []
    for seed in range(40):
        run = known_run(np.random.default_rng(seed))
        share = {v.name: v.count / sum(w.count for w in CLASSES) for v in CLASSES}
        weights = {k: SEED_COUNTS[k[0]] * share[k[1]] for k in run["steady"]
                   if k != ("v_fps2_s224", CLASSES[0].name) and k not in run["cut"]}
        truth = sum(w * run["steady"][k] for k, w in weights.items()) / sum(weights.values())
        uncut = [r for r in run["rows"] if (r["condition"], run["class_of"][r["item_id"]]) not in run["cut"]]
        _, _, steady = aggregate(uncut, run["calls"], run["class_of"], CLASSES, STEADY_FROM)
        _, _, every = aggregate(uncut, run["calls"], run["class_of"], CLASSES)
        steady_err.append(steady["gpu_s"] / truth - 1)
        all_err.append(every["gpu_s"] / truth - 1)
    assert max(abs(e) for e in steady_err) < 0.06, steady_err
    assert min(all_err) > 0.5, all_err


def test_busy_is_read_over_the_rows_each_cell_is_measured_by(tmp_path: Path) -> None:
    # NVML reads 10 % during round 0's calls (compiling, the GPU idle) and 90 % after. v_1's cell
    # has calls in rounds 0 and 1, v_32's in round 0 only (cut at the budget): the steady reading
    # takes v_1's round-1 call, v_32's round-0 one (its rows'), and all rows take both of v_1's.
    samples = [Sample(10 if i < 20 else 90, 1700, 600.0, 0) for i in range(40)]
    polls = [(round(0.1 * (i + 1), 1), i + 1) for i in range(40)]
    lines = [{"ids": ["v_1|R00_30s_16x9_0"], "spans": [[0.0, 1.0]], "end": 1.0, "held_s": 1.0},
             {"ids": ["v_32|R00_30s_16x9_0"], "spans": [[1.0, 2.0]], "end": 2.0, "held_s": 1.0},
             {"ids": ["v_1|R01_30s_16x9_0"], "spans": [[2.0, 3.0]], "end": 3.0, "held_s": 1.0}]
    log = tmp_path / "calls.jsonl"
    log.write_text("\n".join(json.dumps({**x, "tokens": [100], "new_tokens": [3]}) for x in lines))
    busy = call_busy(log, polls, samples)
    calls = {c["ids"][0]: (c["held_s"], c["end"], 3) for c in lines}
    rows = [{"condition": rid.split("|")[0], "item_id": rid.split("|")[1], "status": "OK", "meta": "{}"}
            for rid in calls]
    of = {r["item_id"]: "30s_16x9" for r in rows}
    one = [VideoClass(30.0, (16, 9), 1)]
    _, steady, _ = aggregate(rows, calls, of, one, STEADY_FROM, busy)
    _, every, _ = aggregate(rows, calls, of, one, 0, busy)
    assert steady["v_1"]["busy_in_calls"] == 90.0 and steady["v_32"]["busy_in_calls"] == 10.0
    assert every["v_1"]["busy_in_calls"] == 50.0 and every["v_32"]["busy_in_calls"] == 10.0
    # A steady call that caught no sample reads as nothing, not as round 0's.
    _, blind, _ = aggregate(rows, calls, of, one, STEADY_FROM, {k: v for k, v in busy.items() if "R01" not in k})
    assert "busy_in_calls" not in blind["v_1"]
    assert mix_busy(steady)["busy"] == 50.0  # two conditions of like time: 90 and 10


def test_each_item_asks_its_own_length_and_rounds_are_read_from_ids(tmp_path: Path) -> None:
    ids = {v.name: f"vid_{v.name}" for v in CLASSES}
    folder, class_of = write_items(tmp_path, CLASSES, ids, rounds=3)
    questions = [json.loads(line)["question"] for f in sorted(folder.glob("R*.jsonl"))
                 for line in f.read_text().splitlines()]
    assert len(questions) == 3 * sum(v.count for v in CLASSES) == len(class_of)
    # Lengths spread over the filler's range, not two values repeated every round.
    assert len({len(q.split()) for q in questions}) >= 6
    # Fixed by the id (a hash, not Python's salted one): the same questions on every machine.
    assert filler("R01_30s_16x9_0") == ("in the scene that follows the kitchen and the street where people talk walk "
                                        "cook and wait for")
    assert {round_of(f"v_1|{i}") for i in class_of} == {0, 1, 2}
    assert round_of("v_1|x") == -1 and round_of("R07_a") == 7


def test_the_window_counts_the_engine_held_inside_it_only() -> None:
    # Three calls whose batches interleave: A holds the engine 0-1 and 2-3 s and ends at 3 (2
    # requests), B holds it 1-2 s and ends at 2 (the window's start), C holds it 3.5-4 s and ends
    # at 4. From 2 s to 4 s the engine was held 1.5 s of 2 (A's second stretch, C's), by A's and
    # C's requests (3); summing the calls' whole holding would count A's first second too.
    ends = sorted([(3.0, 1.0, True), (3.0, 1.0, True), (2.0, 1.0, True), (4.0, 0.5, True)])
    spans = [(0.0, 1.0), (2.0, 3.0), (1.0, 2.0), (3.5, 4.0)]
    got = window(ends, [], [], spans)
    assert got == {"wall_s": 2.0, "inferences": 3, "inferences_per_s": 1.5, "held_fraction": 0.75}
    # Outside the window (the flag false) nothing counts; one call alone is no window.
    assert window([(e, g, False) for e, g, _ in ends], [], [], spans) == {}
    assert window([(2.0, 1.0, True), (2.0, 1.0, True)], [], [], spans) == {}


def test_the_report_states_the_gpu_busy_over_the_run_time_with_the_engines_waits() -> None:
    import argparse

    from benchmarks.sweep_mix import lines

    mix = {"busy": {"busy": 87.2, "covered": 1.0}, "weight_steady": 0.72, "weight_measured": 0.995, "gpu_s": 0.72,
           "n_frames": 147.0, "prompt_tokens": 12786.0, "decode_s": 1.2, "first_extra_s": 24.4, "missing_cells": []}
    payload = {"env": {"shape": "qwen3-vl-8b", "device": "H200", "date": "d", "forced": "f", "wall_s": 1, "cpu_s": 1},
               "setup": {}, "child": {"rc": 0, "child_s": 1.0, "killed_at_budget": False},
               "windows": {"all": {"held_fraction": 0.93}, "steady": {"held_fraction": 0.892}}, "held_fraction": 0.892,
               "mix": mix, "cost": {}, "per_condition": {}, "cells": [],
               "all_rows": {"mix": {"busy": {"busy": 82.6}}, "cost": {}, "per_condition": {}}, "timeline": {}}
    text = "\n".join(lines(payload, argparse.Namespace(workers=0, chunk=0, videos="v", rounds=2)))
    assert "over all rows, first visits included: 82.6 %" in text
    assert "engine held 89.2% of the steady window" in text and "about 77.8 % of the run's time" in text
    assert "**28% of the measured weight is read from first visits only**" in text


def test_a_later_rounds_call_run_first_is_the_cells_first_visit() -> None:
    # As on the H100 (2026-12-06): the sweep answered v_8's round-1 call first (5.04 s held, the
    # process's first call) and its round-0 call after (0.19 s). The cell is measured by the later
    # call in time, whatever its round.
    calls = {"v_8_s224|R01_30s_16x9_0": (5.04, 10.0, 3), "v_8_s224|R00_30s_16x9_0": (0.19, 11.0, 3),
             "v_32_s224|R00_30s_16x9_0": (1.11, 12.0, 3), "v_32_s224|R01_30s_16x9_0": (0.66, 13.0, 3)}
    rows = [{"condition": rid.split("|")[0], "item_id": rid.split("|")[1], "status": "OK", "meta": "{}"}
            for rid in calls]
    of = {r["item_id"]: "30s_16x9" for r in rows}
    assert call_ranks(calls, of) == {"v_8_s224|R01_30s_16x9_0": 0, "v_8_s224|R00_30s_16x9_0": 1,
                                     "v_32_s224|R00_30s_16x9_0": 0, "v_32_s224|R01_30s_16x9_0": 1}
    cells, _, mix = aggregate(rows, calls, of, [VideoClass(30.0, (16, 9), 1)], STEADY_FROM)
    assert {c["condition"]: c["gpu_s"] for c in cells} == {"v_8_s224": 0.19, "v_32_s224": 0.66}
    assert all(c["steady"] for c in cells)
    assert mix["first_extra_s"] == round((5.04 - 0.19) + (1.11 - 0.66), 2)
