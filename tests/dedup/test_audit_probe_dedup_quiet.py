"""``benchcheck dedup --quiet`` promises no progress bar: stderr stays empty on a clean pool
(transformers' "Loading weights" bar was drawn there while the model loaded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BIN = [str(Path(sys.executable).with_name("benchcheck"))]


def test_quiet_dedup_writes_nothing_to_stderr(tmp_path: Path) -> None:
    items = tmp_path / "A.jsonl"
    items.write_text("".join(json.dumps({"item_id": f"a{i}", "question": q, "options": ["cup", "ball"],
                                         "answer": 0, "video_id": "v1"}) + "\n"
                             for i, q in enumerate(["What falls first?", "What falls last?"])))
    p = subprocess.run([*BIN, "dedup", "--items", str(items), "--out", str(tmp_path / "out"), "--model", "minilm",
                        "--quiet"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert p.stdout.startswith("ITEMS=2 KEPT=2 ")
