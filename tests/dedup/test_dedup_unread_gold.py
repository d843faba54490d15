"""Items whose gold cannot be read (none, or an index past the options) reach step 0 only through
the Python API (the loader refuses them): their golds are not compared, and one line says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchcheck.dedup import SentenceEmbedder, dedup_items, write_outputs
from benchcheck.dedup.outputs import conflict_warning, unchecked_warning
from benchcheck.items import Item

QUESTION = "What is the man holding in his hand?"
CUP = ("a cup", "a phone", "a book", "a pen")


def item(item_id: str, bench: str, answer: Any, options: tuple[str, ...] = CUP, question: str = QUESTION) -> Item:
    return Item(item_id, bench, question, options, answer, "v1")


def test_exact_copies_with_unreadable_golds_are_not_compared(minilm: SentenceEmbedder, tmp_path: Path) -> None:
    items = [item("alpha_1", "alpha", 0), item("beta_1", "beta", None), item("gamma_1", "gamma", 7)]
    result = dedup_items(items, minilm, 0.95, tmp_path / "cache")
    assert [v.verdict for v in result.verdicts] == ["kept", "exact", "exact"]
    write_outputs(result, tmp_path / "out")
    assert conflict_warning(result.verdicts) is None
    assert unchecked_warning(result.verdicts) == (
        "2 duplicates not checked for a gold conflict (a gold missing or out of range), first: beta_1 (beta) "
        "against alpha_1 (alpha)")
    removed = [json.loads(x) for x in (tmp_path / "out" / "step0_removed.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in removed] == ["exact", "exact"]
    assert "2 duplicates not checked for a gold conflict" in (tmp_path / "out" / "step0_summary.md").read_text()


def test_unreadable_kept_gold_is_not_compared(minilm: SentenceEmbedder, tmp_path: Path) -> None:
    items = [item("alpha_1", "alpha", -1), item("beta_1", "beta", 2)]
    result = dedup_items(items, minilm, 0.95, tmp_path / "cache")
    assert [v.verdict for v in result.verdicts] == ["kept", "exact"]
    write_outputs(result, tmp_path / "out")
    assert unchecked_warning(result.verdicts) is not None
