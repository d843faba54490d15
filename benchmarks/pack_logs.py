"""Masking log files on their way into the returns tarball: MiB/s of ``pack_logs.mask_stream``.

Side by side in one run: a vLLM-like server log (UTF-8, ~1 secret per 1,000 lines), the same log
as UTF-16 and gzip-compressed, and a plain copy (the floor: reading and writing the bytes). With
``--old`` the previous ``pack``'s line-by-line masking (``_write_masked``, UTF-8 logs only) runs on
the UTF-8 log too:

    git show 45fa848:src/benchcheck/data/launch.py > /tmp/oldlaunch.py
    git show 45fa848:src/benchcheck/data/pack.py | sed 's/benchcheck.data.launch/oldlaunch/' > /tmp/oldpack.py
    python -m benchmarks.pack_logs --mib 32 --old /tmp/oldpack.py
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import os
import shutil
import tempfile
from pathlib import Path

from benchcheck.data.pack_logs import mask_stream
from benchcheck.masking import Masker
from benchmarks.shared.timing import best_of

SECRET = "sk-" + "BenchSecretValue0123456789"


def make_log(mib: int) -> bytes:
    line = ("INFO 11-29 10:00:{s:02d} [engine.py:{n}] Avg prompt throughput: 1234.5 tokens/s, "
            "Running: 64 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 71.2%.\n")
    out, n = io.StringIO(), 0
    while out.tell() < mib << 20:
        out.write(line.format(s=n % 60, n=n))
        if n % 1000 == 0:
            out.write(f'INFO launching: vllm serve m --api-key {SECRET} -H "Authorization: Bearer {SECRET}"\n')
        n += 1
    return out.getvalue().encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--old", default=None, help="path of the previous pack.py (see the docstring)")
    a = ap.parse_args()
    masker = Masker([SECRET])
    text = make_log(a.mib)
    with tempfile.TemporaryDirectory() as tmp:
        files = {"utf-8 log": text, "utf-16 log": text.decode().encode("utf-16"),
                 "gzip log": gzip.compress(text, compresslevel=6)}
        print("| file | MiB (decoded) | mask_stream MiB/s | plain copy MiB/s |\n|---|---:|---:|---:|")
        for name, data in files.items():
            src = Path(tmp) / "in"
            src.write_bytes(data)

            def masked(src: Path = src) -> None:
                with src.open("rb") as f, open(os.devnull, "wb") as dst:
                    mask_stream(f, dst, masker)

            def copied(src: Path = src) -> None:
                with src.open("rb") as f, open(os.devnull, "wb") as dst:
                    shutil.copyfileobj(f, dst)

            mib = len(text) / 2**20
            print(f"| {name} | {mib:.0f} | {mib / best_of(masked):.0f} | {len(data) / 2**20 / best_of(copied):.0f} |")
        if a.old:
            spec = importlib.util.spec_from_file_location("oldpack", a.old)
            assert spec is not None and spec.loader is not None, a.old
            old = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(old)
            log = Path(tmp) / "server.log"
            log.write_bytes(text)

            def old_masked() -> None:
                with open(os.devnull, "wb") as dst:
                    old._write_masked(log, dst, [SECRET])

            print(f"| utf-8 log, previous pack (line by line) | {len(text) / 2**20:.0f} | "
                  f"{len(text) / 2**20 / best_of(old_masked):.1f} | |")


if __name__ == "__main__":
    main()
