"""A negation written with a typographic apostrophe ("isn’t", as web text writes it) keeps two
questions apart, as "isn't" does: ``benchcheck dedup`` with the packaged MiniLM model."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from dedup_fixtures import write_bench

from benchcheck.cli import main

CARS = ["the red car", "the blue car", "the green car", "the black car"]


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
def test_a_negated_question_is_not_a_near_duplicate(tmp_path: Path, apostrophe: str) -> None:
    bench = write_bench(tmp_path / "cars.jsonl", [
        ("cars_1", "Which car is moving in the video?", CARS, "v1"),
        ("cars_2", f"Which car isn{apostrophe}t moving in the video?", CARS, "v1"),
    ])
    res = CliRunner().invoke(main, ["dedup", "--items", str(bench), "--out", str(tmp_path / "step0"),
                                    "--model", "minilm", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "ITEMS=2 KEPT=2 EXACT=0 NEAR=0" in res.output
