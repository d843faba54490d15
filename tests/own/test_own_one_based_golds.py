"""A lab's item file whose golds count from 1: every gold loaded names the option after the right
one, and only the golds equal to the option count were refused. The loader now warns once per
benchmark when enough items never have gold 0 and some sit on the last option or past it."""

from __future__ import annotations

import json
from pathlib import Path

from own_helpers import bc

OPTIONS = ["it turns", "it stops", "it falls", "it rolls"]


def write(path: Path, golds: list[int | str], key: str = "answer") -> Path:
    rows = [{"item_id": f"q{k}", "question": f"What happens in clip {k}?", "options": OPTIONS, key: g}
            for k, g in enumerate(golds)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def one_based_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "1-based" in line]


def test_one_based_file_warns_once_with_its_counts(tmp_path: Path) -> None:
    path = write(tmp_path / "mine.jsonl", [1 + k % 4 for k in range(24)])  # 1..4: six of each
    r = bc("items", "validate", path)
    assert r.exit_code == 1  # the six golds of 4 are out of range for 4 options, as before
    assert one_based_lines(r.stderr) == [
        f"warning: {path}:0: benchmark 'mine': golds look 1-based: none of its 24 gold indexes is 0 (A), "
        "6 are the last option and 6 one past it (refused: out of range); golds counted from 0 and spread "
        "evenly would give no A among the 18 loaded by chance 1 in 177. If the file counts from 1, subtract 1 "
        "from every answer (or write the golds as letters A, B, ...) and load it again"]
    assert r.stderr.index("1-based") < r.stderr.index("mine.jsonl:4: q3: gold index 4")  # before per-item lines

    stats = bc("items", "stats", path)  # stats loads quietly, and still says it
    assert stats.exit_code == 0
    assert len(one_based_lines(stats.stderr)) == 1

    # The same golds as digits in a CSV cell: read as indexes too, so the same warning.
    csv = tmp_path / "mine_csv.csv"
    csv.write_text("item_id,question,a0,a1,a2,a3,answer\n" + "".join(
        f"q{k},What happens in clip {k}?,{','.join(OPTIONS)},{1 + k % 3}\n" for k in range(20)))
    assert len(one_based_lines(bc("items", "validate", csv).stderr)) == 1

    # A large benchmark: its odds are not a number of a hundred digits.
    large = write(tmp_path / "large.jsonl", [1 + k % 3 for k in range(1000)])
    (line,) = one_based_lines(bc("items", "validate", large).stderr)
    assert "none of its 1000 gold indexes is 0 (A), 333 are the last option;" in line
    assert "by chance under 1 in a million." in line


def test_no_warning_for_zero_based_small_or_letter_golds(tmp_path: Path) -> None:
    spread = write(tmp_path / "spread.jsonl", [k % 4 for k in range(40)])
    small = write(tmp_path / "small.jsonl", [1 + k % 3 for k in range(19)])  # 1-based, but too few to tell
    letters = write(tmp_path / "letters.jsonl", ["BCD"[k % 3] for k in range(30)])  # letters count from A
    texts = write(tmp_path / "texts.jsonl", [OPTIONS[1 + k % 3] for k in range(30)])  # option texts
    for path in (spread, small, letters, texts):
        r = bc("items", "validate", path)
        assert r.exit_code == 0, r.stderr
        assert one_based_lines(r.stderr) == [], (path, r.stderr)
