"""The demo's probe and label flags checked against the construction (``truth/probe_truth.json``):
the planted position pattern is learnable for the probe (p <= 0.05) and gains over the blind
step-1 forward, the blind forward finds none of it, and the flags name exactly the wrong golds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchcheck.probe.evidence import FLAG_STEPS
from benchcheck.probe.pipeline import ProbeRun

MIN_GAIN = 0.3  # the probe's accuracy over the blind step-1 model's on the planted benchmark


@dataclass(slots=True)
class ProbeCheck:
    lines: list[str] = field(default_factory=list)
    ok: bool = True

    def check(self, cond: bool, text: str) -> None:
        self.ok &= cond
        self.lines.append(f"  {text}: {'ok' if cond else 'DIFFERS'}")


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(v, fmt)


def check_probe(run: ProbeRun, truth: Path, chain: Sequence[int] = (1, 2, 3, 4, 5, 6)) -> ProbeCheck:
    """The checks the chain allows: the blind gain needs step 1; the flags two of steps 3, 5, 6
    (the probe alone never sees the clip, so it cannot name a mislabelled item on its own)."""
    t = json.loads(truth.read_text(encoding="utf-8"))
    out = ProbeCheck()
    benches = {b.bench: b for b in run.result.benches}
    for planted in t["planted_pattern"]:
        b = benches.get(planted["bench"])
        if b is None or b.skipped is not None:
            out.check(False, f"{planted['bench']} ({planted['pattern']}): not probed")
            continue
        p = b.uniform.p_value if b.uniform else 1.0
        out.check(b.learnable, f"{b.bench} ({planted['pattern']}): probe accuracy {b.accuracy:.2f} vs chance "
                               f"{b.chance:.2f}, p={p:.3g}, learnable")
        gain = b.blind_gain
        if 1 not in chain:
            out.lines.append(f"  {b.bench}: no step 1 in the chain, no blind gain to check")
            continue
        out.check(gain is not None and gain >= MIN_GAIN and (b.blind_accuracy or 0.0) <= (b.chance or 0.0),
                  f"{b.bench}: the blind step-1 forward gets {_num(b.blind_accuracy)} (no better than chance), "
                  f"the probe gains {_num(gain, '+.2f')} over it")
    if sum(s in chain for s in FLAG_STEPS) < 2:
        out.lines.append("  label flags: fewer than two of steps 3, 5, 6 in the chain, not checked")
        return out
    wrong = {w["item_id"] for w in t["wrong_golds"]}
    flagged = {f.item_id for f in run.flags or []}
    out.check(flagged == wrong, f"label flags: {len(flagged & wrong)} of {len(wrong)} planted wrong golds flagged, "
                                f"{len(flagged - wrong)} other flags")
    return out
