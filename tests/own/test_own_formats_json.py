"""JSON item files as labs name them."""

from __future__ import annotations

import json
from pathlib import Path

from own_helpers import bc, item


def test_json_lines_under_a_json_name_load_as_jsonl(tmp_path: Path) -> None:
    # The same file `items import --from hf-folder` reads (as datasets does): one object per line.
    path = tmp_path / "mine.json"
    path.write_text("".join(json.dumps(item(k, f"clip{k}.mp4")) + "\n" for k in range(3)) + "\n")
    r = bc("items", "validate", path)
    assert r.exit_code == 0, r.stderr
    assert "mine                           3       3      0     0" in r.stdout
    torn = tmp_path / "torn.json"
    torn.write_text(path.read_text().rstrip("\n")[:-20])
    r = bc("items", "validate", torn)
    assert r.exit_code == 1 and f"{torn}:3: line is not JSON" in r.stderr
