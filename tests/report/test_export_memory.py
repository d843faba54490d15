"""An export writes each file a row at a time: what it holds does not grow with the benchmark.

Every format held all of its files in memory (bytes, and the rows they were made of) before writing
any, so exporting a large benchmark took several times its files' size (numbers: docs/decisions/137).
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path, PurePosixPath

import pytest

from benchcheck.items import Item
from benchcheck.report.export import FORMATS, Selected, export

# One video for every item, its path parts held here: the Inspect export reads a video's suffix with
# pathlib, which interns each part (sys.intern), and a name per item would make the interpreter's table
# of interned strings reallocate now and then, a peak that is the interpreter's, not the export's.
VIDEO = "/videos/clip.mp4"
_VIDEO_PARTS = PurePosixPath(VIDEO)


def pick(n: int) -> dict[str, list[Selected]]:
    """``n`` items whose text does not compress away (a Parquet file is as large as its rows)."""
    return {"A": [Selected(Item(f"A_{i}", "A", f"Question {i}? " + hashlib.sha256(str(i).encode()).hexdigest() * 6,
                                ("a", "b", "c", f"d {i}"), i % 4), None, VIDEO) for i in range(n)]}


def peak(fmt: str, out: Path, n: int) -> tuple[int, int]:
    """The most bytes of Python objects the export of ``n`` items held at once, and the bytes written."""
    rows = pick(n)
    tracemalloc.start()
    try:
        paths = export(fmt, out, rows, False)
        top = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return top, sum(p.stat().st_size for p in paths)


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_exports_memory_does_not_grow_with_the_benchmark(tmp_path: Path, fmt: str) -> None:
    export(fmt, tmp_path / "warm", pick(3), False)  # the imports (pyarrow, yaml) happen once, before
    small, small_bytes = peak(fmt, tmp_path / "small", 2000)
    large, large_bytes = peak(fmt, tmp_path / "large", 8000)
    assert large_bytes > 3 * small_bytes
    # a Parquet row group (1,000 rows) is the most an export holds: the same for 2,000 items and 8,000
    assert large < 1.25 * small + 256 * 1024, (small, large, large_bytes)
    assert large < large_bytes, (large, large_bytes)
