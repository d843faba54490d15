"""A file written whole gets the mode a plain ``open()`` gives under the process's umask, as rows
appended beside it do: ``mkstemp``'s 0600 left a results folder shared with a group holding rows
it could read and a run_spec.json, a report or a pack's checksum it could not."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

_WRITE = """
import os, sys
from pathlib import Path
from benchcheck.atomic import write_json_atomic
out = Path(sys.argv[1])
write_json_atomic(out / "whole.json", {"a": 1})
with open(out / "plain.txt", "w") as f:
    f.write("x")
"""


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_a_file_written_whole_has_the_mode_open_gives(tmp_path: Path, umask: int) -> None:
    subprocess.run([sys.executable, "-c", _WRITE, str(tmp_path)], check=True, timeout=120,
                   preexec_fn=lambda: os.umask(umask))
    whole = stat.S_IMODE((tmp_path / "whole.json").stat().st_mode)
    plain = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert whole == plain == 0o666 & ~umask, (oct(whole), oct(plain))
