"""Folders published whole (``atomic.swap_folder``) and a dead writer's leftovers cleared
(``atomic.clear_dead``): with real processes racing on one folder."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcheck.atomic import clear_dead, swap_folder, writer_tag

FILES = 12


def _writer(final: str, who: int, rounds: int) -> None:
    target = Path(final)
    for r in range(rounds):
        tag = writer_tag()
        staging = target.parent / f".out.building-{tag}"
        staging.mkdir()
        for k in range(FILES):
            (staging / f"f{k}.txt").write_text(f"{who}:{r}")
        swap_folder(staging, target, target.parent / f".out.old-{tag}")


def test_two_writers_publishing_one_folder_leave_one_whole_and_nothing_else(tmp_path: Path) -> None:
    final = tmp_path / "out"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(final), who, 40)) for who in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]  # neither failed when the other published meanwhile
    contents = {f.read_text() for f in final.iterdir()}
    assert len(list(final.iterdir())) == FILES and len(contents) == 1  # one writer's round, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging or old folder left


def test_a_failed_swap_puts_the_old_folder_back(tmp_path: Path) -> None:
    final = tmp_path / "out"
    final.mkdir()
    (final / "a.txt").write_text("old")
    with pytest.raises(FileNotFoundError):
        swap_folder(tmp_path / "no-such-staging", final, tmp_path / ".out.old-x")
    assert (final / "a.txt").read_text() == "old" and not (tmp_path / ".out.old-x").exists()
    staging = tmp_path / "new"
    staging.mkdir()
    (staging / "b.txt").write_text("new")
    swap_folder(staging, final, tmp_path / ".out.old-y")
    assert [f.name for f in final.iterdir()] == ["b.txt"] and not staging.exists()


def test_only_a_dead_writers_folders_are_cleared(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, live = int(gone.stdout), os.getpid()
    names = [f".tmp-v1-{dead}-0000aaaa", f".old-v-1-{dead}-0000bbbb", f".tmp-v2-{live}-0000cccc",
             ".tmp-untagged", "kept", f".other-{dead}-0000dddd"]
    for n in names:
        (tmp_path / n).mkdir()
    assert clear_dead(tmp_path, (".tmp-", ".old-")) == 3  # the dead writer's two, and one with no tag
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f".tmp-v2-{live}-0000cccc", "kept",
                                                                  f".other-{dead}-0000dddd"])
    assert clear_dead(tmp_path / "absent", (".tmp-",)) == 0
