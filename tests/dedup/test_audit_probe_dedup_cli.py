"""``benchcheck dedup`` on planted duplicates (whitespace, case, unicode, reordered options) and on
look-alikes that are different questions; and a threshold that is not a number."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

BIN = [str(Path(sys.executable).with_name("benchcheck"))]
COLOURS = ["red", "blue", "green", "yellow"]
TOOLS = ["a cup", "a phone", "a book", "a pen"]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _item(iid: str, q: str, opts: list[str], video: str, answer: int = 0) -> dict[str, object]:
    return {"item_id": iid, "question": q, "options": opts, "answer": answer, "video_id": video}


def _pool(tmp_path: Path) -> tuple[Path, Path]:
    a = _write(tmp_path / "A.jsonl", [
        _item("a1", "What colour is the car parked outside the café?", COLOURS, "v1"),
        _item("a2", "What does the woman do after opening the door?", ["sits", "runs", "waves", "cries"], "v2"),
        _item("a3", "How many birds fly over the lake?", ["1", "2", "3", "4"], "v3"),
        _item("a4", "What is the person doing?", ["dancing", "walking", "sitting", "waving"], "v4"),
        _item("a5", "What is the man holding in his hand?", TOOLS, "v6"),
    ])
    b = _write(tmp_path / "B.jsonl", [
        _item("b1", "What colour is the car parked outside the café?", COLOURS, "v1"),
        _item("b2", "What  does the woman\tdo after\u00a0opening the door?", ["sits", "runs", "waves", "cries"], "v2"),
        _item("b3", "HOW MANY BIRDS FLY OVER THE LAKE?", ["1", "2", "3", "4"], "v3"),
        _item("b4", "What is the person doing?", ["dancing", "walking", "sitting", "waving"], "v99"),
        _item("b5", "What is the man holding in his hand?", TOOLS[::-1], "v6", 3),  # a5's gold, "a cup"
        _item("b6", "What colour is the car parked outside the cafe\u0301?", COLOURS, "v1"),
        _item("b7", "What does the woman do before opening the door?", ["sits", "runs", "waves", "cries"], "v2"),
    ])
    return a, b


def _dedup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BIN, "dedup", "--model", "minilm", "--quiet", *args], capture_output=True, text=True,
                          timeout=300)


def test_planted_duplicates_found_and_look_alikes_kept(tmp_path: Path) -> None:
    a, b = _pool(tmp_path)
    p = _dedup("--items", str(a), "--items", str(b), "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    rows = {r["item_id"]: r for r in pq.read_table(tmp_path / "o" / "step0_kept.parquet").to_pylist()}
    verdict = {k: (r["verdict"], r["duplicate_of"]) for k, r in rows.items()}
    assert verdict["b1"] == ("exact", "a1")
    assert verdict["b2"] == ("exact", "a2")  # whitespace (tab, no-break space) collapsed
    assert verdict["b3"] == ("near", "a3")  # case
    assert verdict["b5"] == ("near", "a5")  # options reordered
    assert verdict["b6"] == ("near", "a1")  # the same word in decomposed unicode
    assert verdict["b4"] == ("kept", None)  # the same question about another video
    assert verdict["b7"] == ("kept", None)  # before/after: another question
    assert all(rows[k]["kept"] for k in ("a1", "a2", "a3", "a4", "a5"))


def test_a_threshold_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    a, b = _pool(tmp_path)
    for bad in ("nan", "inf"):
        p = _dedup("--items", str(a), "--items", str(b), "--out", str(tmp_path / "o"), "--threshold", bad)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (p.stdout, p.stderr)
        assert "--threshold" in p.stderr
    assert not (tmp_path / "o").exists()
