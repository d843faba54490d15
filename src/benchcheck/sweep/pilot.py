"""Pilot mode: a few benchmarks first, and seed 001's per-condition timing table."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

PILOT_BENCHES = ("MVBench", "LVBench", "TimeScope")


def pilot_benches(present: Iterable[str]) -> list[str]:
    """MVBench, LVBench and TimeScope when present, else the first three benchmarks (sorted)."""
    have = sorted(set(present))
    chosen = [b for b in PILOT_BENCHES if b in have]
    return chosen or have[:3]


def timing_table(path: Path, benches: Iterable[str] | None = None) -> list[str]:
    """Per condition: inferences, infer_s/item, decode_s/item, prompt tokens/item (seed 001 section 4)."""
    keep = set(benches) if benches is not None else None
    t: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if not isinstance(r, dict) or (keep is not None and r.get("bench") not in keep):
                continue
            s = t[str(r.get("condition"))]
            s[0] += int(r.get("infer", 0))
            s[1] += float(r.get("infer_s", 0.0))
            s[2] += float(r.get("decode_s", 0.0))
            s[3] += int(r.get("prompt_tokens", 0))
    lines = []
    for k, (n, s_, d, tok) in sorted(t.items()):
        m = max(n, 1)
        lines.append(f"{k:16s} infer={int(n):5d}  infer_s/item={s_ / m:6.2f}  decode_s/item={d / m:6.2f}  "
                     f"prompt_tok/item={tok / m:8.0f}")
    return lines
