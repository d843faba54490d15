"""The append-only results store, with real concurrent and killed writer processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchcheck.store import append_rows, bench_files, bench_of_file, load_state, read_rows, unit_file

WRITER = str(Path(__file__).with_name("store_writer.py"))


def test_torn_tail_is_ended_before_appending(tmp_path: Path) -> None:
    p = tmp_path / "B.jsonl"
    append_rows(p, [{"item_id": "a"}])
    with p.open("ab") as f:
        f.write(b'{"item_id": "torn", "sta')  # a killed writer's fragment
    append_rows(p, [{"item_id": "b"}, {"item_id": "c", "status": "error"}])
    rows = list(read_rows(p))
    assert [r["item_id"] for r in rows] == ["a", "b", "c"]
    lines = p.read_bytes().split(b"\n")
    assert lines[1] == b'{"item_id": "torn", "sta'  # the fragment is left alone on its own line


def test_status_rules_and_error_limit(tmp_path: Path) -> None:
    d = tmp_path / "step1"
    append_rows(d / "B.jsonl", [{"item_id": "x"}, {"item_id": "y", "status": "error"},
                                {"item_id": "z", "status": "error"}, {"item_id": "z", "status": "timeout"},
                                {"item_id": "z", "status": "error"}, {"item_id": "w", "status": "ok", "removed": True}])
    append_rows(d / "B.p1.jsonl", [{"item_id": "y", "status": "ok", "v": 2}])
    (d / "notes.txt").write_text("ignored")
    s = load_state(d)
    assert s.is_done("x") and s.is_done("y") and s.ok["y"]["v"] == 2
    assert s.errors["y"] == 1 and not s.is_failed("y")
    assert s.is_failed("z") and s.failed_ids() == ["z"]
    assert s.is_removed("w") and not s.is_removed("x")
    assert [p.name for p in bench_files(d, ["B"])] == ["B.jsonl", "B.p1.jsonl"]
    assert bench_of_file("My.Bench.p12.jsonl") == "My.Bench" and bench_of_file("x.csv") is None
    assert unit_file(d, "B", 0, 1).name == "B.jsonl" and unit_file(d, "B", 3, 4).name == "B.p3.jsonl"


def test_last_ok_row_wins(tmp_path: Path) -> None:
    d = tmp_path / "s"
    append_rows(d / "B.jsonl", [{"item_id": "x", "v": 1}, {"item_id": "x", "v": 2}])
    assert load_state(d).ok["x"]["v"] == 2


def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    p = tmp_path / "step1" / "B.jsonl"
    procs = []
    for w in range(4):
        code = ("import sys; from benchcheck.store import append_rows\n"
                f"for k in range(200): append_rows(sys.argv[1], [{{'item_id': f'{w}-{{k}}-{{j}}', 'pad': 'y' * 5000}}"
                " for j in range(3)])")
        procs.append(subprocess.Popen([sys.executable, "-c", code, str(p)]))
    for pr in procs:
        assert pr.wait(timeout=120) == 0
    raw = p.read_bytes().split(b"\n")
    assert raw[-1] == b""
    parsed = [json.loads(x) for x in raw[:-1]]  # every line parses: no interleaving
    ids = Counter(r["item_id"] for r in parsed)
    assert len(ids) == 4 * 200 * 3 and max(ids.values()) == 1


def test_writer_killed_mid_batch_then_rerun_completes(tmp_path: Path) -> None:
    p = tmp_path / "step1" / "B.jsonl"
    n = 3000
    pr = subprocess.Popen([sys.executable, WRITER, str(p), str(n), "50", "first"])
    deadline = time.time() + 60
    while time.time() < deadline and (not p.exists() or p.stat().st_size < 2_000_000):
        time.sleep(0.01)
    os.kill(pr.pid, signal.SIGKILL)
    pr.wait()
    before = p.read_bytes()
    assert len(before) > 0
    lines = before.split(b"\n")
    torn = [x for x in lines if x and not x.endswith(b"}")]
    assert len(torn) <= 1
    subprocess.run([sys.executable, WRITER, str(p), str(n), "50", "second"], check=True, timeout=120)
    assert p.read_bytes().startswith(before)  # nothing already written is rewritten
    ok = Counter(r["item_id"] for r in read_rows(p))
    assert set(ok) == {f"i{j:06d}" for j in range(n)}
    assert max(ok.values()) == 1
