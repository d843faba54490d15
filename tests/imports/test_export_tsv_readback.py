"""Issue 40, hostile input 10: a VLMEvalKit TSV must read back as written with pandas (VLMEvalKit's
reader), or the item is left out with the reason. Checked against pandas itself over random tables."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchcheck.items import Item
from benchcheck.report.export import LETTERS, Selected, export, pandas_reads

pd = pytest.importorskip("pandas")

# Cells that pandas may type: digits, signs, floats, exponents, booleans, big ints, spaced numbers.
TOKENS = ["3", "12", "0", "007", "+2", "-1", "3.0", "3.50", "0.1", "1e3", "1E-2", "inf", "-inf", "True", "False",
          "true", "FALSE", "9223372036854775808", "12345678901234567890", " 4", "5 ", "1_000", "0x10", "٣",
          "abc", "red", "3 cats", "1,000", "12:30", "-", ".", "1.", ".5", "1.2.3", "None of these"]


def _item(i: int, options: list[str], question: str = "q?", task: str | None = None, item_id: str | None = None,
          video: str | None = None) -> Selected:
    it = Item(item_id or f"T_{i}", "T", question, tuple(options), 0, task=task)
    return Selected(it, None, video)


def _read(path: Path) -> dict[str, dict[str, str | None]]:
    df = pd.read_csv(path, sep="\t")  # as VLMEvalKit's load() reads a TSV
    out: dict[str, dict[str, str | None]] = {}
    for _, line in df.iterrows():
        cells = {c: (None if pd.isna(line[c]) else str(line[c])) for c in df.columns}
        out[str(line["item_id"])] = cells
    return out


def _check_round_trip(rows: list[Selected], tmp_path: Path) -> tuple[int, list[dict[str, str]]]:
    [tsv, *side] = export("vlmevalkit", tmp_path, {"T": rows}, False)
    got = _read(tsv)
    left = [json.loads(x) for x in side[0].read_text().splitlines()] if side else []
    assert len(got) + len(left) == len(rows)
    by_id = {s.item.item_id: s for s in rows}
    for iid, cells in got.items():
        it = by_id[iid].item
        options = [cells[c] for c in LETTERS if c in cells and cells[c] is not None]
        assert options == list(it.options), (iid, options, it.options)
        assert cells["question"] == it.question and cells["category"] == it.task
        assert options[LETTERS.index(str(cells["answer"]))] == it.options[it.answer]
    return len(got), left


def test_export_names_the_left_out_items_on_the_command_line(tmp_path: Path) -> None:
    from import_helpers import export, screen_step1, write_jsonl

    items = write_jsonl(tmp_path / "items" / "N.jsonl", [
        {"item_id": "n0", "question": "How many?", "options": ["3", "5", "7"], "answer": 0},
        {"item_id": "n1", "question": "How many?", "options": ["2", "4"], "answer": 1}])
    screen_step1(items, tmp_path / "results", tmp_path)
    r = export(tmp_path / "results", items, "vlmevalkit", tmp_path / "out")
    assert "note: 1 item left out of N_kept.tsv (they would not read back as written; reasons in" in r.output


def test_all_digit_options_read_back_as_written_or_are_left_out_with_the_reason(tmp_path: Path) -> None:
    # Column C is all digits with empty cells (2-option items): pandas reads 3 as 3.0
    rows = [_item(0, ["red", "blue", "3"]), _item(1, ["green", "pink"]), _item(2, ["x", "y", "4", "5"])]
    n, left = _check_round_trip(rows, tmp_path)
    assert n == 1 and {x["item_id"] for x in left} == {"T_0", "T_2"}
    reason = next(x["reason"] for x in left if x["item_id"] == "T_0")
    assert "option C '3' reads back as '3.0' in pandas" in reason


def test_uniform_digit_options_are_kept(tmp_path: Path) -> None:
    """Counting questions with four numeric options each: an integer column with no gap reads back as written."""
    rows = [_item(i, [str(i), str(i + 2), str(i + 5), str(i + 7)], f"How many {i}?") for i in range(5)]
    n, left = _check_round_trip(rows, tmp_path)
    assert n == 5 and left == []


def test_leaving_an_item_out_retypes_the_column(tmp_path: Path) -> None:
    """T_0 goes (a null word); with it gone, column A holds only digits and the 2-option T_2 makes a gap
    in column C: the check runs again on what is left."""
    rows = [_item(0, ["None", "b", "c"]), _item(1, ["1", "2", "3"]), _item(2, ["4", "5"])]
    n, left = _check_round_trip(rows, tmp_path)
    assert n == 1 and [x["item_id"] for x in left] == ["T_0", "T_1"]


def test_id_and_category_columns_are_checked_too(tmp_path: Path) -> None:
    rows = [_item(0, ["a", "b"], item_id="007"), _item(1, ["c", "d"], item_id="8", task="1"),
            _item(2, ["e", "f"], item_id="9")]
    n, left = _check_round_trip(rows, tmp_path)
    assert n == 1 and [x["item_id"] for x in left] == ["007", "8"]
    assert "item_id '007' reads back as '7'" in left[0]["reason"]
    assert "category '1' reads back as '1.0'" in left[1]["reason"]


def test_random_tables_never_change_a_kept_cell(tmp_path: Path) -> None:
    """200 random tables of tricky cells: every kept item reads back exactly (the model errs only on the
    safe side); the share left out is recorded in docs/report.md."""
    kept = total = 0
    for seed in range(200):
        rng = random.Random(seed)
        vocab = rng.sample(TOKENS, rng.randint(2, 6))
        rows = []
        for i in range(rng.randint(1, 8)):
            opts = list(dict.fromkeys(rng.choice(vocab) for _ in range(rng.randint(2, 4))))
            opts += [f"w{k}" for k in range(2 - len(opts))]
            task = rng.choice(["", "t", rng.choice(vocab)]).strip() or None
            rows.append(_item(i, opts, task=task))
        out = tmp_path / str(seed)
        n, _ = _check_round_trip(rows, out)
        kept, total = kept + n, total + len(rows)
    print(f"kept {kept} of {total}")
    assert total > 500 and kept > 0


@pytest.mark.parametrize("cells", [["3", "", "4"], ["3", "4"], ["1e3", "x"], ["true", ""], ["True", "False"],
                                   ["0.1", "2.5"], ["007"], ["3", " 4"]])
def test_model_agrees_with_pandas_or_errs_safe(cells: list[str], tmp_path: Path) -> None:
    p = tmp_path / "c.tsv"
    p.write_text("col\tpad\n" + "".join(f"{c}\tx\n" for c in cells))
    real = [None if pd.isna(v) else str(v) for v in pd.read_csv(p, sep="\t")["col"]]
    model = pandas_reads(cells)
    for c, r, m in zip(cells, real, model, strict=True):
        if m == c:  # never claims 'as written' when pandas changes it
            assert r == c, (c, r, m)
