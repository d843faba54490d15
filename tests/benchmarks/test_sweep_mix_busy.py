"""``sweep_mix.busy_in_calls``: NVML's busy samples attributed to the conditions whose engine calls ran."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.shared.nvml import Sample
from benchmarks.sweep_mix import busy_in_calls


def test_samples_during_each_call_count_for_its_condition(tmp_path: Path) -> None:
    # Samples every 0.1 s from t=0: busy 100 from 0 to 1 s, 40 from 1 to 2 s, 0 after. A v_1 call
    # holding the engine 0.0-0.5 and 2.0-3.0 s (another call's batches between), one v_32 call
    # 1.0-2.0 s, and a torn last line (a child killed).
    samples = [Sample(100 if i < 10 else 40 if i < 20 else 0, 1700, 600.0, 0) for i in range(30)]
    polls = [(round(0.1 * (i + 1), 1), i + 1) for i in range(30)]
    calls = tmp_path / "calls.jsonl"
    lines = [{"ids": ["v_1|a", "v_1|b"], "spans": [[0.0, 0.5], [2.0, 3.0]], "end": 3.0},
             {"ids": ["v_32|a"], "spans": [[1.0, 2.0]], "end": 2.0},
             {"ids": ["v_8|a"], "end": 3.0}]  # no spans (an older log): left out
    calls.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"ids": ["v_8')
    got = busy_in_calls(calls, polls, samples)
    assert got == {"v_1": round(500 / 15, 1), "v_32": 40.0}
    assert busy_in_calls(tmp_path / "none.jsonl", polls, samples) == {}
