"""The report tests' shared site: the scripted pool (``report_helpers.screened_pool``) and its report,
built once a session; the tests read it and write elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import cli, screened_pool


@pytest.fixture(scope="session")
def scripted_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(items, results, report folder) of the scripted pool."""
    root = tmp_path_factory.mktemp("report")
    items, res = screened_pool(root)
    out = root / "report"
    r = cli("report", "--results", str(res), "--items", str(items), "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out / "index.html")
    return items, res, out
