"""A sweep asked for nothing (no condition, no item) says so and fails: it said "nothing to do:
every row is already written" and exited 0, as if a finished run were there."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_helpers import item, sweep_cli, write_items, write_rules

from benchcheck.sweep.conditions import parse_conditions


@pytest.mark.parametrize("conds", [",", " ", " , ,"])
def test_conds_naming_no_condition_is_an_error(conds: str) -> None:
    with pytest.raises(ValueError, match="--conds: no condition"):
        parse_conditions(conds)


@pytest.mark.parametrize("sub", ["run", "dry-run"])
def test_cli_conds_naming_no_condition_fails_in_one_line(tmp_path: Path, store: Path, sub: str) -> None:
    items = write_items(tmp_path / "items", [item("Alpha", 1, "short20")])
    extra = ["--engine", "scripted", "--rules", str(write_rules(tmp_path / "r.json", [{"match": "", "reply": "A"}])),
             "--decode-workers", "0", "--no-progress"] if sub == "run" else []
    out = sweep_cli(sub, "--items", str(items[0]), "--store", str(store), "--results", str(tmp_path / "res"),
                    "--conds", ",", *extra)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "no condition" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "nothing to do" not in out.stdout


def _open_item(n: int) -> dict[str, object]:
    """An item of more options than letters: kept by the loader (format=open), never swept."""
    return {**item("Open", n, "short20"), "options": [f"option {i}" for i in range(30)]}


@pytest.mark.parametrize(("rows", "extra"), [
    ([item("Alpha", 1, "short20")], ["--bench", ","]),
    ([_open_item(1), _open_item(2)], []),
])
@pytest.mark.parametrize("sub", ["run", "dry-run"])
def test_cli_no_item_to_sweep_fails_in_one_line(tmp_path: Path, store: Path, sub: str,
                                                 rows: list[dict[str, object]], extra: list[str]) -> None:
    items = write_items(tmp_path / "items", rows)  # type: ignore[arg-type]
    if sub == "run":
        rules = write_rules(tmp_path / "r.json", [{"match": "", "reply": "A"}])
        extra = [*extra, "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    res = tmp_path / "res"
    out = sweep_cli(sub, "--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind",
                    *extra)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "nothing to do" not in out.stdout
    assert out.stderr.strip().splitlines()[-1].startswith("error: no items to sweep")
    assert not (res / "sweep_rows").exists()  # no run spec recorded for a run of nothing
