"""A results writer run as a separate process by the store tests.

Usage: python store_writer.py FILE N_ITEMS BATCH [TAG]
Appends rows for the items that have no ok row yet, BATCH rows per append, in item order.
"""

from __future__ import annotations

import sys

from benchcheck.store import append_rows, load_state


def main() -> None:
    path, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tag = sys.argv[4] if len(sys.argv) > 4 else "w"
    from pathlib import Path

    p = Path(path)
    state = load_state(p.parent)
    todo = [f"i{j:06d}" for j in range(n) if f"i{j:06d}" not in state.ok]
    pad = "x" * 3000  # large rows make a kill inside a batch likely
    for k in range(0, len(todo), batch):
        append_rows(p, [{"item_id": i, "status": "ok", "writer": tag, "pad": pad} for i in todo[k:k + batch]])


if __name__ == "__main__":
    main()
