"""The probe's and the label flags' error rates on constructions of known truth, over many seeds
(docs/probe.md).

1. false discovery: benchmarks with nothing to learn (``synth.pattern_items("none")``: golds drawn
   uniformly), the share called learnable at p <= 0.05 (uniform-gold null), and the share of the
   second null (positions kept);
2. power: each planted pattern (longest option, a word shared with the question, a position bias)
   at full and half strength, the share called learnable;
3. label flags: precision and recall against planted wrong golds (``synth.flag_sources``) at the
   default margin and agreement, and at other margins.

    PYTHONPATH=src python benchmarks/probe_rates.py [--seeds 100] [--items 60] [--permutations 19]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import resource
import time

import numpy as np

from benchcheck.probe.flags import FLAG_AGREE, FLAG_MARGIN, check_flags, label_flags
from benchcheck.probe.run import ProbeConfig, run_probe
from benchcheck.probe.synth import flag_sources, pattern_items
from benchcheck.protocol import LOG2


def _ci(k: int, n: int) -> str:
    p = k / n
    half = 1.96 * np.sqrt(max(p * (1 - p), 1e-9) / n)
    return f"{p:.3f} [{max(0.0, p - half):.3f}, {min(1.0, p + half):.3f}] ({k}/{n})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--items", type=int, default=60)
    ap.add_argument("--permutations", type=int, default=19)
    a = ap.parse_args()
    t0, c0 = time.time(), time.process_time()
    print(f"# probe_rates {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"seeds={a.seeds} items={a.items} permutations={a.permutations}, hand features (--model none)")
    cfg = ProbeConfig(permutations=a.permutations, shuffle_null=True, ibp=False)
    called = kept_called = 0
    for s in range(a.seeds):
        b = run_probe(pattern_items("none", a.items, seed=1000 + s), cfg).benches[0]
        called += b.learnable
        kept_called += b.shuffle is not None and b.shuffle.p_value <= 0.05
    print(f"1. nothing to learn: called learnable {_ci(called, a.seeds)}; "
          f"positions-kept null {_ci(kept_called, a.seeds)}")
    fast = ProbeConfig(permutations=a.permutations, shuffle_null=False, ibp=False)
    for pattern in ("longest", "shared_word", "position"):
        for strength in (1.0, 0.5):
            hits = sum(run_probe(pattern_items(pattern, a.items, seed=2000 + s, strength=strength),
                                 fast).benches[0].learnable for s in range(max(a.seeds // 4, 5)))
            print(f"2. {pattern:<12} strength {strength:.1f}: called learnable {_ci(hits, max(a.seeds // 4, 5))}")
    for margin in (0.5, LOG2, FLAG_MARGIN, 1.5):
        for agree in (FLAG_AGREE, 3):
            tp = fl = pl = 0
            for s in range(a.seeds):
                w = flag_sources(2000, seed=3000 + s)
                c = check_flags(label_flags(w.golds, w.sources, margin, agree), w.wrong)
                tp, fl, pl = tp + c.true_flags, fl + c.flagged, pl + c.planted
            tag = " (default)" if margin == FLAG_MARGIN and agree == FLAG_AGREE else ""
            print(f"3. flags margin {margin:.3f} agree {agree}{tag}: precision {tp / max(fl, 1):.3f} "
                  f"({tp}/{fl}), recall {tp / max(pl, 1):.3f} ({tp}/{pl})")
    print(f"wall {time.time() - t0:.1f} s, CPU {time.process_time() - c0:.1f} s, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
