"""Two exports into one folder at once: the second is refused in one line naming the folder (exit 1),
and writes nothing; once the first is done, or dead, the folder is free again.

Both read and rewrite the folder's manifests and files: run at once, each removed the files the
other had just written (or claimed them as its own), so what was left depended on which finished last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scripted_pool import cli, screened

# The first export, in a process of its own: a real export of one benchmark whose rows, once it is
# writing them (the folder held), wait for the file ``go`` to appear.
HOLDER = """
import sys, time
from pathlib import Path
from benchcheck.items import Item
from benchcheck.report.export import Selected, export

out, started, go = map(Path, sys.argv[1:4])


class Waiting(list):
    def __iter__(self):
        started.touch()
        while not go.exists():
            time.sleep(0.02)
        return super().__iter__()


export("inspect", out, {"Held": Waiting([Selected(Item("Held_0", "Held", "Q?", ("a", "b"), 0), None, None)])}, False)
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("concurrent_export")
    benches = {name: [{"item_id": f"{name}_{i}", "question": f"Plain {name} {i}?", "options": ["a", "b", "c", "d"],
                       "answer": i % 4} for i in range(3)] for name in ("One", "Two")}
    items, res, _ = screened(root, benches)
    return items, res


def holding(tmp_path: Path, out: Path) -> tuple[subprocess.Popen[str], Path]:
    """The first export, started and writing into ``out`` (it waits there until ``go`` exists)."""
    started, go = tmp_path / "started", tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), str(started), str(go)], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first export never started writing"
        time.sleep(0.02)
    return first, go


def files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", ["inspect", "lmms-eval"])
def test_a_second_export_into_a_folder_being_written_is_refused(pool: tuple[Path, Path], tmp_path: Path,
                                                                fmt: str) -> None:
    items, res = pool
    out = tmp_path / "export"
    args = ("export", "--results", str(res), "--items", str(items), "--format", fmt, "--out", str(out),
            "--chain", "1")
    first, go = holding(tmp_path, out)
    try:
        before = files(out)
        second = cli(*args)
        assert second.returncode == 1, second.stderr
        lines = second.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {out}: another export is writing this folder"), lines
        assert f"pid={first.pid}" in lines[0] and "Traceback" not in second.stderr
        assert files(out) == before  # the refused export wrote nothing
    finally:
        go.touch()
        _out, stderr = first.communicate(timeout=60)
    assert first.returncode == 0, stderr
    assert (out / "Held_kept.inspect.jsonl").is_file()
    again = cli(*args)  # the folder is free once the first is done
    assert again.returncode == 0, again.stderr
    assert any(p.name.startswith("One_kept") for p in out.iterdir())


def test_a_dead_exports_hold_on_the_folder_ends_with_it(pool: tuple[Path, Path], tmp_path: Path) -> None:
    # the kernel drops the lease however its holder ends (kill -9 included): no lock file to clear by hand
    items, res = pool
    out = tmp_path / "export"
    first, _go = holding(tmp_path, out)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    r = cli("export", "--results", str(res), "--items", str(items), "--format", "inspect", "--out", str(out),
            "--chain", "1")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.glob("*.inspect.jsonl")) == ["One_kept.inspect.jsonl", "Two_kept.inspect.jsonl"]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # the killed one's temporary file is gone
