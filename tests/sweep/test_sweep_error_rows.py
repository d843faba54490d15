"""A row of ``conditions_results.csv`` whose status is no answer and not NA (an older run's or another
tool's ``error``) was done for ``sweep dry-run`` (the reducer read every status of the file as an
answer), so no rerun ever asked the cell again, while ``sweep analyze`` left it out and ``pack``
counted it an error row. It is now an error row for every reader, as screening reads one: the dry
run plans the cell again, the rerun's answer is appended after the error row (which held the key,
so the answer was never written to the file), and an error row after an answer leaves it the answer."""

from __future__ import annotations

import csv
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules


def _set_status(path: Path, key: tuple[str, str], status: str) -> None:
    rows = list(csv.DictReader(path.open(newline="")))
    for r in rows:
        if (r["condition"], r["item_id"]) == key:
            r.update(status=status, pred="", correct="", parse="")
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def test_an_error_row_is_no_answer_for_any_reader_and_a_rerun_asks_it_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    rows = [item("Own", k, "clipA", question="unsure about this one" if k == 1 else "What happens?")
            for k in range(4)]
    items = write_items(tmp_path / "items", rows)
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1",
              "--engine", "scripted"]
    rules = write_rules(tmp_path / "rules.json", [{"match": "unsure", "reply": "I cannot tell from these frames."},
                                                  {"match": "", "reply": "The answer is A."}])
    run = [*common, "--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    assert sweep_cli("run", *run).returncode == 0

    # v_1 as a run made before the typed rows left it (its rows in the CSV only), one of them an error;
    # v_blind: another tool appended an error row after Own_0's answer.
    path = res / "conditions_results.csv"
    (res / "sweep_rows" / "v_1" / "Own.jsonl").unlink()
    _set_status(path, ("v_1", "Own_2"), "error")
    answer = next(ln for ln in path.read_text().splitlines() if ln.startswith("Own,Own_0,v_blind,ok,"))
    with path.open("a") as f:
        f.write(answer.replace(",ok,A,A,1,answer_phrase,", ",error,,A,,,") + "\n")

    got = every_readers_counts(res, common, "before")
    assert got["dry"] == {"v_blind": {"todo": 0, "done": 4}, "v_1": {"todo": 1, "done": 3}}
    done = {"v_blind": 4, "v_1": 3}
    for reader in ("analyze", "pack", "page"):
        assert {c: v["n"] for c, v in got[reader].items()} == done, reader
        assert {c: v["unparsed"] for c, v in got[reader].items()} == {"v_blind": 1, "v_1": 1}, reader
    for reader in ("analyze", "pack", "page"):  # every output counts the error row it leaves out
        assert {c: v["errors"] for c, v in got[reader].items()} == {"v_blind": 0, "v_1": 1}, reader

    before = path.read_bytes()
    assert sweep_cli("run", *run).returncode == 0
    after = path.read_bytes()
    assert after.startswith(before)  # the error row stays; the answer's row follows it
    assert after[len(before):].decode().startswith("Own,Own_2,v_1,ok,A,A,1,")
    got = every_readers_counts(res, common, "after")
    assert got["dry"] == {"v_blind": {"todo": 0, "done": 4}, "v_1": {"todo": 0, "done": 4}}
    for reader in ("analyze", "pack", "page"):
        assert {c: v["n"] for c, v in got[reader].items()} == {"v_blind": 4, "v_1": 4}, reader
        assert {c: v["errors"] for c, v in got[reader].items()} == {"v_blind": 0, "v_1": 0}, reader
