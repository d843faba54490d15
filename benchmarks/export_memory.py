"""Peak memory of ``benchcheck export`` on a large selection, per format.

Each format runs in a child process of its own: it builds the selection (``--items`` synthetic
items, ``--benches`` benchmarks, questions of ``--question-chars`` characters), exports three items
of each benchmark (the libraries a format imports on first use are loaded then), then resets the
process's peak RSS (``/proc/self/clear_refs``) and runs ``report.export.export`` into a fresh
folder. What is reported is the export's own peak: the peak RSS during the export less the RSS
before it (the selection itself, held by the command anyway), and the bytes written.
``--tracemalloc`` reports tracemalloc's peak of the export instead (Python objects only, slower).

    PYTHONPATH=src python -m benchmarks.export_memory --items 200000 --dir /dev/shm
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FORMATS = ("inspect", "lmms-eval", "vlmevalkit", "parquet")


def _status_kib(field: str) -> int:
    m = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(m.group(1)) if m else 0


def child(fmt: str, n: int, benches: int, chars: int, out: Path, trace: bool) -> dict[str, Any]:
    from benchcheck.items import Item
    from benchcheck.report.export import Selected, export

    pad = "x" * max(0, chars - 24)
    selected: dict[str, list[Selected]] = {f"Bench{b}": [] for b in range(benches)}
    for i in range(n):
        bench = f"Bench{i % benches}"
        it = Item(f"{bench}_{i}", bench, f"Question {i}: what happens? {pad}", (f"option a {i}", f"option b {i}",
                  f"option c {i}", f"option d {i}"), i % 4, task="synthetic", duration_s=12.5 + i % 7)
        selected[bench].append(Selected(it, None, f"/videos/{bench}/{i}.mp4"))
    # the libraries a format imports on first use (pyarrow, yaml), and a first export, before the peak
    export(fmt, out / "warm", {bench: rows[:3] for bench, rows in selected.items()}, False)
    before = _status_kib("VmRSS")
    if trace:
        import tracemalloc

        tracemalloc.start()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # the peak RSS from here on
    t0 = time.perf_counter()
    paths = export(fmt, out / "export", selected, False)
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {"format": fmt, "items": n, "benches": benches, "wall_s": round(wall, 2),
                           "bytes_written": sum(p.stat().st_size for p in paths)}
    if trace:
        import tracemalloc

        row["tracemalloc_peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    else:
        row["rss_before_mib"] = round(before / 1024, 1)
        row["export_peak_mib"] = round((_status_kib("VmHWM") - before) / 1024, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=200_000)
    ap.add_argument("--benches", type=int, default=4)
    ap.add_argument("--question-chars", type=int, default=200)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--dir", default=None, help="where the exports are written (removed after each)")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.items, a.benches, a.question_chars, Path(a.dir), a.tracemalloc)))
        return
    for fmt in a.formats.split(","):
        out = Path(tempfile.mkdtemp(prefix="export_memory_", dir=a.dir))
        try:
            args = [sys.executable, "-m", "benchmarks.export_memory", "--child", fmt, "--items", str(a.items),
                    "--benches", str(a.benches), "--question-chars", str(a.question_chars), "--dir", str(out)]
            r = subprocess.run([*args, *(["--tracemalloc"] if a.tracemalloc else [])], capture_output=True,
                               text=True, check=False)
            print(r.stdout.strip() or f'{{"format": "{fmt}", "error": {json.dumps(r.stderr[-500:])}}}', flush=True)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
