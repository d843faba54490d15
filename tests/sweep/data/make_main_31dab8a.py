"""Make ``main_31dab8a/``: a sweep results folder written by the code of main 31dab8a (before the
typed rows), for the migration test. Run it with that commit's code first on the path:

    git archive 31dab8a src tests | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base/src:/tmp/base/tests/sweep python tests/sweep/data/make_main_31dab8a.py OUT

It uses the store and items of ``tests/sweep`` (``conftest.VIDEOS``, ``test_sweep_runner._items``) and
the scripted rules of that test; the CSV, ``p1_raw`` and ``data/logs`` are then copied here.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from sweep_helpers import item, stored_video, write_items, write_rules

from benchcheck.items import load_items
from benchcheck.sweep.cli_run import SweepArgs, run
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import SweepPaths

VIDEOS = {"long16x9": (640, 400, 224), "short20": (20, 320, 180), "s480": (40, 852, 480),
          "mid100": (100, 320, 180), "s720": (34, 1280, 720)}
CONDS = "v_blind,v_1,v_32,v_32_s448,v_fps0.25_s224"
RULES = [{"match": "unsure", "reply": "I cannot tell from these frames."}, {"match": "", "reply": "The answer is A."}]


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        store = tmp / "store"
        for vid, (n, w, h) in VIDEOS.items():
            stored_video(store, vid, n, w, h)
        rows = [item("Alpha", 0, "long16x9"), item("Alpha", 1, "short20"), item("Alpha", 2, "s480"),
                item("Alpha", 3, "mid100", question="unsure about this one"), item("Alpha", 4, None),
                item("Alpha", 5, "k:0123456789abcdef"), item("Beta", 0, "mid100", answer=1),
                item("Beta", 1, "s720"), item("Beta", 2, "mid100", answer=2)]
        items = load_items(write_items(tmp / "items", rows)).items
        rules = write_rules(tmp / "rules.json", RULES)
        paths = SweepPaths.under(out)
        summary = run(SweepArgs(items, str(store), paths, CONDS, engine=SweepEngine("scripted", rules=str(rules)),
                                progress=False, decode_workers=0), print)
        print(json.dumps(dict(summary.written)))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
