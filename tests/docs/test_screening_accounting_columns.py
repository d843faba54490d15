"""The screening page's row for `run_accounting.csv` names every column `assemble` writes there, in
order: it once left out `ok_rows_logged`, the run log's own sum beside the reducer's `items_ok`."""

from __future__ import annotations

import json
from pathlib import Path

from docs_text import DOCS

from benchcheck.screen.assemble import accounting_rows


def test_the_run_accounting_row_lists_the_columns_assemble_writes(tmp_path: Path) -> None:
    run = {"step": 1, "shard": 0, "n_shards": 1, "shard_spec": "0/1", "started": 0.0, "ended": 2.0,
           "wall_s": 2.0, "ok": 3, "errors": 0}
    (tmp_path / "run_log.jsonl").write_text(json.dumps(run) + "\n")
    written = [k for k in accounting_rows(tmp_path)[0] if k != "step"]
    row = next(line for line in (DOCS / "screening.md").read_text().splitlines()
               if line.startswith("| `run_accounting.csv` |"))
    text = row.split("run_log.jsonl`:", 1)[1]
    missing = [c for c in written if f"`{c}`" not in text]
    assert missing == []
    assert sorted(written, key=lambda c: text.index(f"`{c}`")) == written  # in the file's order
