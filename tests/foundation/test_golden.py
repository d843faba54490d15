"""The protocol against golden vectors: the seed reference's outputs on fixed inputs, stored as data.

These run everywhere, a bare clone included (``golden/make_golden.py`` wrote them once from the
reference). The live reference is checked on random inputs in test_protocol.py / test_shard.py
where ``../shared`` is present.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from benchcheck import protocol as P
from benchcheck.shard import assign_units, plan_units

GOLDEN = Path(__file__).resolve().parent / "golden"


@cache
def golden(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    return cases


def test_golden_files_are_present_and_not_trivial() -> None:
    sizes = {n: len(golden(n)) for n in ("permutations", "letter_logprobs", "margins", "strip_prefix", "shard")}
    assert all(v >= 50 for v in sizes.values()), sizes


def test_permutations_match_golden() -> None:
    for c in golden("permutations"):
        assert P.permutations_for(c["item_id"], c["k"], c["n_perm"], c["seed"]) == c["out"], c


def test_letter_logprobs_match_golden() -> None:
    for c in golden("letter_logprobs"):
        lp, missing, variants = P.letter_logprobs(c["top"], c["k"])
        assert list(lp) == c["out"]["lp"], c  # exact: the log-sum-exp must merge in the same order
        assert list(missing) == c["out"]["missing"], c
        assert {k: list(v) for k, v in variants.items()} == c["out"]["variants"], c


def test_margins_and_argmax_match_golden() -> None:
    for c in golden("margins"):
        assert P.margin_of(c["lp"], c["pos"]) == c["out"]["margin"], c
        assert P.argmax_pos(c["lp"]) == c["out"]["argmax"], c


def test_option_stripping_and_rendering_match_golden() -> None:
    for c in golden("strip_prefix"):
        texts, stripped = P.strip_sequential_prefix(c["opts"])
        assert (list(texts), stripped) == (c["out"]["texts"], c["out"]["stripped"]), c
        assert P.render_options(texts) == c["rendered"], c
        assert P.item_text("Why?", c["opts"]) == c["item_text"], c


@pytest.mark.parametrize("i", range(len(golden("shard"))))
def test_plan_and_assign_units_match_golden(i: int) -> None:
    c = golden("shard")[i]
    units = plan_units([(b, ids) for b, ids in c["work"]], c["max_unit"])
    assert [[u.bench, u.part, u.n_parts, list(u.ids)] for u in units] == c["units"]
    for t, want in enumerate(c["tasks"]):
        mine, loads = assign_units(units, c["n_tasks"], t)
        assert [[u.bench, u.part] for u in mine] == want["mine"]
        assert list(loads) == want["loads"]
