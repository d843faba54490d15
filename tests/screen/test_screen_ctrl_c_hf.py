"""Ctrl-C on a `screen` with the in-process `hf` engine: one line and exit 130 at the engine call's
next batch, not when the whole call ends; the items whose answers were complete keep their rows
(whole, none twice), and the same command again ends where an uninterrupted run ends.

Before, the engine's worker thread could not be cancelled: the process waited for the rest of
the call (minutes at a GPU's call sizes), then wrote none of its answers."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from screen_helpers import ok_rows, torn_lines

from benchcheck.demo.videos import make_demo_videos, store_and_cache
from benchcheck.store import read_rows

N = 24


def _start(tmp_path: Path, tiny_model: Path, results: Path) -> tuple[subprocess.Popen[str], float]:
    """The screen process, once its progress bar shows (its one engine call has begun), and when."""
    args = ["screen", "--items", str(tmp_path / "items"), "--step", "3",
            "--chain", "3", "--frames", str(tmp_path / "frames"), "--results", str(results), "--engine", "hf",
            "--model", str(tiny_model), "--device", "cpu",
            # two requests a forward: the call is a dozen batches, each a boundary to stop at
            "--hf-config", "max_batch_size=2"]
    p = subprocess.Popen([sys.executable, "-m", "benchcheck", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert p.stderr is not None
    seen = ""
    while "step 3:" not in seen:
        c = p.stderr.read(1)
        assert c, seen
        seen += c
    return p, time.monotonic()


@pytest.mark.timeout(1200)
def test_ctrl_c_stops_at_the_next_batch_and_keeps_the_finished_rows(tmp_path: Path, tiny_model: Path) -> None:
    ids = store_and_cache(make_demo_videos(tmp_path / "videos", n=2), tmp_path / "store", tmp_path / "frames")
    (tmp_path / "items").mkdir()
    (tmp_path / "items" / "clips.jsonl").write_text("".join(
        json.dumps({"item_id": f"q{i}", "question": f"What is painted in frame {i}?", "options": ["a digit", "a cat"],
                    "answer": i % 2, "video_id": ids[i % 2]}) + "\n" for i in range(N)))

    clean = tmp_path / "clean"
    p, began = _start(tmp_path, tiny_model, clean)
    out, _ = p.communicate(timeout=900)
    whole = time.monotonic() - began  # the call (and the process's exit)
    assert p.returncode == 0, out
    assert len(ok_rows(clean / "step3")) == N

    cut = tmp_path / "cut"
    p, began = _start(tmp_path, tiny_model, cut)
    time.sleep(0.45 * whole)  # about half the call's batches have landed
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    assert p.stderr is not None
    err = ""
    while "interrupted:" not in err and (c := p.stderr.read(1)):
        err += c
    said = time.monotonic() - sent  # the line, not the exit: torch's teardown at exit takes seconds here
    err += p.stderr.read()
    p.wait(timeout=300)
    assert p.returncode == 130, err
    lines = err.splitlines()
    assert lines[-1] == "interrupted: what was written stays; the same command again resumes", err
    assert sum("interrupted" in line for line in lines) == 1, err
    assert "Traceback" not in err
    kept = ok_rows(cut / "step3")  # exactly one row per item: none twice
    assert 0 < len(kept) < N, len(kept)  # the batches that landed before the stop, and no more
    assert torn_lines(cut / "step3") == 0
    assert all(r.get("status", "ok") == "ok" for f in (cut / "step3").glob("*.jsonl") for r in read_rows(f))
    # Without the stop the process went on to the end of the call (about 0.55 of ``whole``) first;
    # now one batch of the dozen at most.
    assert said < 0.3 * whole, (said, whole)

    p, _ = _start(tmp_path, tiny_model, cut)  # the same command again
    rest, _ = p.communicate(timeout=900)
    assert p.returncode == 0, rest
    a, b = ok_rows(clean / "step3"), ok_rows(cut / "step3")
    assert set(a) == set(b)
    for i in a:  # a row's answers do not depend on which run (or batch) gave them
        assert a[i]["removed"] == b[i]["removed"] and a[i]["pick"] == b[i]["pick"], i
        assert all(math.isclose(x, y, abs_tol=1e-4) for x, y in zip(a[i]["lp"], b[i]["lp"], strict=True)), i
