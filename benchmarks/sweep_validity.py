"""How often the sweep's verdicts are wrong on constructed results of known truth.

    PYTHONPATH=src python -m benchmarks.sweep_validity [--runs 10] [--power-runs 5] [--n-perm 2000]

Every benchmark is one :class:`benchcheck.sweep.constructed.World` (300 items, answers drawn as
that module says) scored by the real verdict code (``analysis.bench_verdict``, default settings
unless given). Tables, in Markdown:

1. Null worlds (no condition changes accuracy) at 300, 10 and 2 videos per benchmark: the share of
   benchmarks that get pixels / frames / both (false verdicts; goal <= 5 %, 0 at 2 videos), the
   share that reaches ``neither`` (correct here), and the coverage of the two effects' intervals.
   ``runs`` x 20 benchmarks per row.
2. Power: worlds with a planted pixels or frames effect of a stated size: the share of benchmarks
   whose verdict names that effect, and the intervals' coverage of the true effect.
3. The margin: a true pixels effect exactly at the margin (0.05), frames none: how often the
   verdict is (wrongly) ``neither``.

Prints the CPU seconds it used. Deterministic for the arguments.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace

import numpy as np

from benchcheck.report.stats import wilson
from benchcheck.sweep.analysis import BenchTable, BenchVerdict, Settings, bench_verdict
from benchcheck.sweep.constructed import World, world_rows
from benchcheck.sweep.verdict_stats import Interval

BENCHES = 20
ALL_FPS = ("v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224")


def run_world(w: World, n: int, s: Settings, tag: int) -> list[BenchVerdict]:
    out = []
    for b in range(n):
        rows = world_rows(w, "B", np.random.default_rng([tag, b]))
        out.append(bench_verdict(BenchTable("B", rows), s))
    return out


def share(flags: list[bool], ci: bool = False) -> str:
    k, n = sum(flags), len(flags)
    text = f"{100 * k / n:.1f} % ({k}/{n})"
    if ci:
        r = wilson(k, n)
        text += f" [{100 * (r.lo or 0):.1f}, {100 * (r.hi or 0):.1f}]"
    return text


def names_effect(v: BenchVerdict, effect: str) -> bool:
    """The verdict names ``effect`` (pixels or both for pixels; frames or both for frames)."""
    return v.verdict in (effect, "both")


def covers(i: Interval | None, truth: float) -> bool:
    return i is not None and i.lo <= truth <= i.hi


def coverage(vs: list[BenchVerdict], pixels: float, frames: float) -> str:
    n = len(vs)
    cp = sum(covers(v.pixels, pixels) for v in vs)
    cf = sum(covers(v.frames, frames) for v in vs)
    return f"{100 * cp / n:.0f} / {100 * cf / n:.0f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="null rows: runs of 20 benchmarks")
    ap.add_argument("--power-runs", type=int, default=5, help="power rows: runs of 20 benchmarks")
    ap.add_argument("--n-perm", type=int, default=2000)
    ap.add_argument("--margin", type=float, default=0.05)
    args = ap.parse_args()
    s = Settings(n_perm=args.n_perm, margin=args.margin)
    cpu0, wall0 = time.process_time(), time.time()
    print(f"# sweep_validity: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
          f"python {platform.python_version()}, settings {s}")

    n_null = args.runs * BENCHES
    print(f"\n## 1. Null worlds: no condition changes accuracy ({n_null} benchmarks of 300 items per row)\n")
    print("| world | videos | pixels / frames / both (false) [95% CI] | names pixels | names frames | neither | "
          "undetermined | interval coverage pixels / frames |")
    print("|---|---|---|---|---|---|---|---|")
    nulls = (("coin flips", World()), ("sticky, keep 0.8", World(kind="sticky", keep=0.8)),
             ("sticky, keep 0.95", World(kind="sticky", keep=0.95)))
    for j, (label, null) in enumerate(nulls):
        for nv in (300, 10, 2):
            vs = run_world(replace(null, n_videos=nv), n_null, s, 1000 * j + nv)
            print(f"| {label} | {nv} | {share([v.verdict in ('pixels', 'frames', 'both') for v in vs], True)} | "
                  f"{share([names_effect(v, 'pixels') for v in vs])} | "
                  f"{share([names_effect(v, 'frames') for v in vs])} | "
                  f"{share([v.verdict == 'neither' for v in vs])} | "
                  f"{share([v.verdict == 'undetermined' for v in vs])} | {coverage(vs, 0.0, 0.0)} |")

    n_pow = args.power_runs * BENCHES
    print(f"\n## 2. Power: a planted effect of the stated size ({n_pow} benchmarks of 300 items per row; "
          "world sticky, keep 0.8)\n")
    print("| planted effect | size | videos | verdict names it | exact verdict | interval coverage "
          "pixels / frames |")
    print("|---|---|---|---|---|---|")
    base = World(kind="sticky", keep=0.8)
    cases = (("pixels", base, "pixels"), ("frames, one rung (v_128_s224)", base, "frames"),
             ("frames, all 5 rungs", replace(base, frames_rungs=ALL_FPS), "frames"))
    for j, (label, case, which) in enumerate(cases):
        for size in (0.05, 0.10, 0.20):
            for nv in (300, 10):
                w = replace(case, n_videos=nv, pixels=size if which == "pixels" else 0.0,
                            frames=size if which == "frames" else 0.0)
                vs = run_world(w, n_pow, s, 50_000 + 1000 * j + int(100 * size) * 10 + nv)
                names = share([names_effect(v, which) for v in vs])
                exact = share([v.verdict == which for v in vs])
                print(f"| {label} | {size:+.2f} | {nv} | {names} | {exact} | "
                      f"{coverage(vs, w.pixels, w.frames)} |")

    print(f"\n## 3. The margin: true pixels effect = {s.margin:g}, frames none ({n_null} benchmarks per row)\n")
    print("| world | videos | neither (wrong) [95% CI] | pixels (right) |")
    print("|---|---|---|---|")
    for keep in (0.95, 0.8):
        label = f"sticky, keep {keep}"
        for nv in (300, 10):
            w = World(n_videos=nv, kind="sticky", keep=keep, pixels=s.margin)
            vs = run_world(w, n_null, s, 90_000 + nv + int(100 * w.keep))
            print(f"| {label} | {nv} | {share([v.verdict == 'neither' for v in vs], True)} | "
                  f"{share([v.verdict == 'pixels' for v in vs])} |")

    print(f"\nCPU {time.process_time() - cpu0:.0f} s, wall {time.time() - wall0:.0f} s")


if __name__ == "__main__":
    main()
