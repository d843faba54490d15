"""The shortcut profile's intervals on a benchmark of two or three videos stay inside the range a
figure can take. An accuracy difference lies in [-1, 1]; with 2 videos the t quantile on one degree
of freedom is 12.7, so ``mean +- t x SE`` reached [-5.3, +6.1] (`audit_profile.csv`, `audit.md`),
a bound no data can have. Measured before the fix (``stats.cluster.mean_interval`` on paired gains
of items answered 4 times and once, accuracy 0.3 / 0.9 / 1.0, gain 0 / 0.1, videos independent or
ICC 0.3, 400 seeds per row): an interval outside [-1, 1] in 7-100 % of runs at 2 videos (100 % with
one item per video), 0-81 % at 3 and 0-28 % at 5 videos; coverage of the true gain 100 % at 2
videos and 93-100 % at 3, which clipping to [-1, 1] leaves as it is (the truth lies inside)."""

from __future__ import annotations

import csv
import dataclasses
import random
import subprocess
import sys
from pathlib import Path

import pytest
from audit_synth import SimModel, make_items, run_step, write_items

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


@pytest.mark.parametrize("videos", [2, 3])
def test_profile_interval_inside_the_figure_range(tmp_path: Path, videos: int) -> None:
    rng = random.Random(videos)
    items = [dataclasses.replace(it, video_id=f"v{i % videos}") for i, it in enumerate(make_items("Few", 12, 4, rng))]
    write_items(tmp_path / "items" / "Few.jsonl", items)
    # content favours the gold on half the items, so gains and gaps vary between the videos
    content = {it.item_id: [rng.gauss(0, 1.0) + (3.0 if j == it.answer and rng.random() < 0.5 else 0.0)
                            for j in range(4)] for it in items}
    model = SimModel("sim", noise=1.0, rng=random.Random(videos + 10))
    for step in (1, 2, 3, 4, 5, 6):
        run_step(tmp_path / "results", step, items, model, content)
    r = subprocess.run([*BIN, "audit", "--results", str(tmp_path / "results"), "--items", str(tmp_path / "items"),
                        "--out", str(tmp_path / "audit"), "--rounds", "50"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader((tmp_path / "audit" / "audit_profile.csv").open()))
    with_interval = [g for g in rows if g["lo"] not in ("", None)]
    assert with_interval, rows
    for g in with_interval:
        lo, hi, v = float(g["lo"]), float(g["hi"]), float(g["value"])
        assert -1.0 <= lo <= v <= hi <= 1.0, g
