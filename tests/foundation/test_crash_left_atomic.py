"""A kill -9 inside ``atomic.write_atomic`` leaves a temporary file; the next write clears it.

Before, the temporary file was ``.NAME.<random>.tmp`` with no trace of its writer: each kill left
one more (as large as the file being written) and nothing ever removed them. Now the name carries
the writer's PID (``.NAME.PID-HEX.tmp``) and the next write of that file removes a dead writer's
(a live writer's is left alone); the caches whose file names are new on every write clear the
dead ones of their folder themselves.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchcheck.atomic import file_tag, write_atomic, writer_tag
from benchcheck.dedup.cache import BenchCache
from benchcheck.probe.embeddings import EmbeddingCache

CHUNK = 1 << 20
# A writer that has written part of a large payload when it says "writing" and then waits there:
# the test kills it at that point (nothing of the project is patched; the callback is the caller's).
WRITER = """
import sys, time
from benchcheck.atomic import write_atomic

def write(f):
    f.write(b"x" * CHUNK * 4)
    f.flush()
    print("writing", flush=True)
    time.sleep(120)
    f.write(b"x" * CHUNK * 4)

write_atomic(sys.argv[1], write)
""".replace("CHUNK", str(CHUNK))


def _start_writer(target: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    return proc


def _temps(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(".tmp"))


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_writer_killed_mid_write_leaves_a_file_the_next_write_removes(tmp_path: Path) -> None:
    target = tmp_path / "rows.bin"
    target.write_bytes(b"old")
    for _ in range(3):  # each kill leaves one; the next writer clears the one before: never more than one
        proc = _start_writer(target)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    left = _temps(tmp_path)
    assert len(left) == 1 and all(p.name.startswith(".rows.bin.") for p in left)
    assert all(p.stat().st_size >= 4 * CHUNK for p in left)  # as large as what was being written
    assert target.read_bytes() == b"old"  # the kill never reached the target
    write_atomic(target, lambda f: f.write(b"new" * CHUNK))  # the rerun
    assert target.read_bytes() == b"new" * CHUNK
    assert _temps(tmp_path) == []


def test_a_live_writers_temporary_file_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "rows.bin"
    proc = _start_writer(target)
    try:
        write_atomic(target, lambda f: f.write(b"other"))
        left = _temps(tmp_path)
        assert len(left) == 1 and f".{proc.pid}-" in left[0].name
    finally:
        proc.kill()
        proc.wait(timeout=10)
    write_atomic(target, lambda f: f.write(b"again"))
    assert _temps(tmp_path) == [] and target.read_bytes() == b"again"


def test_another_hosts_temporary_file_is_left_alone(tmp_path: Path) -> None:
    """Array tasks on several hosts write the same file of a shared folder: a PID that is dead here
    may be a live writer there."""
    dead = _dead_pid()
    host = file_tag().split(".")[0]
    other = "0" * 8 if host != "0" * 8 else "1" * 8
    theirs = tmp_path / f".run_spec.json.{other}.{dead}-0badc0de.tmp"
    mine = tmp_path / f".run_spec.json.{host}.{dead}-0badc0de.tmp"
    theirs.write_bytes(b"x")
    mine.write_bytes(b"x")
    write_atomic(tmp_path / "run_spec.json", lambda f: f.write(b"{}"))
    assert theirs.exists() and not mine.exists()


def test_caches_with_new_names_each_write_clear_dead_writers_files(tmp_path: Path) -> None:
    dead = _dead_pid()
    emb = EmbeddingCache(tmp_path / "probe", "m", "fp")
    keys = np.array([1, 2, 3], dtype=np.uint64)  # all in bucket 0 (top 4 bits clear)
    bucket = emb.folder / "b0"
    bucket.mkdir(parents=True)
    dead_part = bucket / f".emb-0123456789ab.npy.{dead}-0badc0de.tmp"
    dead_part.write_bytes(b"x" * 100)
    live_part = bucket / f".emb-ba9876543210.npy.{writer_tag()}.tmp"  # this (live) process's
    live_part.write_bytes(b"x" * 100)
    emb.add(keys, np.ones((3, 4), dtype=np.float32))
    assert not dead_part.exists() and live_part.exists()

    bench = BenchCache(tmp_path / "dedup" / "b", "m", "fp")
    bench.folder.mkdir(parents=True)
    dead_matrix = bench.folder / f".emb-00112233.npy.{dead}-0badc0de.tmp"
    dead_matrix.write_bytes(b"x" * 100)
    bench.save({"i1": ("h1", np.ones(4, dtype=np.float32))})
    assert not dead_matrix.exists()
    assert (bench.folder / "ids.json").is_file()


def test_rows_of_a_part_whose_writer_died_before_its_keys_are_removed(tmp_path: Path) -> None:
    """A kill between a part's rows file and its keys file left the rows for ever (no lookup reads
    them); the next write to the bucket removes them, unless their writer is alive."""
    dead = _dead_pid()
    host = file_tag().split(".")[0]
    emb = EmbeddingCache(tmp_path / "probe", "m", "fp")
    bucket = emb.folder / "b0"
    bucket.mkdir(parents=True)
    orphan = bucket / f"emb-{host}.{dead}-0badc0de.npy"
    in_progress = bucket / f"emb-{file_tag()}.npy"  # this live process's part, keys still to come
    whole_rows, whole_keys = bucket / f"emb-{host}.{dead}-00c0ffee.npy", bucket / f"keys-{host}.{dead}-00c0ffee.npy"
    for f in (orphan, in_progress):
        np.save(f, np.ones((1, 4), dtype=np.float16))
    np.save(whole_rows, np.ones((1, 4), dtype=np.float16))
    np.save(whole_keys, np.array([7], dtype=np.uint64))
    emb.add(np.array([1, 2], dtype=np.uint64), np.ones((2, 4), dtype=np.float32))
    assert not orphan.exists() and in_progress.exists() and whole_rows.exists() and whole_keys.exists()
    _rows, found = EmbeddingCache(tmp_path / "probe", "m", "fp").lookup(np.array([1, 2, 7], dtype=np.uint64))
    assert found.all()
