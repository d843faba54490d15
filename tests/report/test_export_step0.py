"""``export --step0``: the duplicates step 0 removed (left out of screening by ``screen --keep``) are
removed at step 0 in the export, as the report counts them, not pending; ``--removed`` exports them
with ``removed_at`` 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripted_pool import RULES, cli


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("export_step0")
    items = root / "items"
    items.mkdir()
    rows = [{"item_id": f"m{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(6)]
    rows[0]["options"] = ["RIGHT", "w1", "w2", "w3"]  # removed at step 1
    (items / "Mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    keep = root / "kept.txt"
    keep.write_text("m0\nm1\nm2\nm3\n")  # m4 and m5 are step 0's duplicates
    (root / "rules.json").write_text(json.dumps(RULES))
    res = root / "results"
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(root / "rules.json"), "--keep", str(keep), "--no-progress")
    assert r.returncode == 0, r.stderr
    return items, res, keep


def export(pool: tuple[Path, Path, Path], out: Path, *extra: str) -> str:
    r = cli("export", "--results", str(pool[1]), "--items", str(pool[0]), "--format", "inspect", "--out", str(out),
            "--chain", "1", *extra)
    assert r.returncode == 0, r.stderr
    return r.stderr


def ids(path: Path) -> dict[str, object]:
    return {(s := json.loads(x))["id"]: s["metadata"]["removed_at"] for x in path.read_text().splitlines()}


def test_step0_duplicates_are_removed_at_step_0_not_pending(pool: tuple[Path, Path, Path], tmp_path: Path) -> None:
    err = export(pool, tmp_path / "plain")
    assert "2 pending" in err and "--step0" in err
    err = export(pool, tmp_path / "kept", "--step0", str(pool[2]))
    assert "3 kept items" in err and "pending" not in err
    assert set(ids(tmp_path / "kept" / "Mine_kept.inspect.jsonl")) == {"m1", "m2", "m3"}
    err = export(pool, tmp_path / "removed", "--step0", str(pool[2]), "--removed")
    assert "3 removed items" in err and "pending" not in err
    assert ids(tmp_path / "removed" / "Mine_removed.inspect.jsonl") == {"m0": 1, "m4": 0, "m5": 0}


def test_step0_that_cannot_be_read_is_one_line(pool: tuple[Path, Path, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    r = cli("export", "--results", str(pool[1]), "--items", str(pool[0]), "--format", "inspect", "--out",
            str(tmp_path / "o"), "--chain", "1", "--step0", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: --step0")
