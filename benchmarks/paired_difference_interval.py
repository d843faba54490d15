"""The sweep's verdict under candidate intervals, beside today's rule, on the same draws (decisions 127, 136).

    PYTHONPATH=src python -m benchmarks.paired_difference_interval [--part skew,null,power,margin] [--runs 1000]
        [--skew-runs 2000] [--check 20]
    PYTHONPATH=src python -m benchmarks.paired_difference_interval --part demo \
        --demo-csv DEMO_OUT/sweep/results/conditions_results.csv

Every run draws one benchmark's answers once; each rule then computes the two effects' intervals
from the same answers and takes the verdict by ``analysis.decide``'s rule (helps: p <= alpha / 2
and the interval above 0; flat: the interval inside the margin). The p-values are the product's
(``verdict_stats.permutation_pvalue`` on the same random stream as ``analysis.effect``), computed
only where some rule's interval lies above 0; every rule uses the same p-value, so the rules differ
only through their intervals.

Rules (pixels interval x frames interval; ``H`` the frames rungs present, alpha 0.05):

* ``wald`` (the product's rule before decision 136): est +- t(CR2 df) x max(CR2 SE, Agresti-Min SE)
  for both effects; frames: every rung at ``alpha / H`` (Bonferroni), [max lower, max upper].
* ``score-pix`` (a): the pixels effect by the Tango score interval at the effective sample size
  ``n / deff`` with the t quantile on the CR2 df (decision 127's candidate; the bounds by the
  product's ``verdict_stats.score_difference_interval`` itself); frames as ``wald``.
* ``cap-pix``: pixels as ``wald`` with the t quantile's df at most one more than the videos carrying
  the discordant answers (``stats.cluster.carrying_videos`` of the items whose answer differs;
  decision 126's rule for a rare rate; no cap where no answer differs); frames as ``wald``.
* ``iut-frm`` (b): pixels as ``wald``; the frames interval's upper bound the max of the rungs'
  upper bounds at ``alpha`` each (lower bounds still at ``alpha / H``). The max of the rungs' true
  effects is below the max of their upper bounds whenever the bound of the rung that attains the
  max holds (probability 1 - alpha / 2): no multiplicity to pay on that side (an intersection-union
  argument, Berger 1982); the lower side (``helps``) keeps the Bonferroni family.
* ``score-pix+iut-frm``, ``cap-pix+iut-frm``: a pixels candidate with (b). ``score-pix+iut-frm`` is
  the product's rule since decision 136 (``--product-rule``, checked by ``--check``).
* ``score-both``: decision 127's trial, both effects by the score interval (frames Bonferroni).

Parts: ``skew``: ``benchmarks.sweep_margin_skew``'s four cells (a true pixels effect of 0.05 that a
few videos carry; "own videos' effect": the mean true gain of the videos that run drew, the
benchmark's own effect rather than the population's); ``null``: ``sweep.constructed`` worlds where
nothing changes accuracy, at 300 / 30 / 10 videos; ``power``: planted effects (world sticky, keep
0.8); ``margin``: a true pixels effect of exactly the margin spread evenly
(``benchmarks.sweep_validity``'s table 3; also a frames effect at the margin on one rung or all
five); ``demo``: a ``benchcheck demo run``'s own sweep results at the demo's settings (p-values the
product's). ``--check K``: the first K runs of every row also go through ``analysis.bench_verdict``
(the product, on CSV-shaped rows), which must give the ``--product-rule`` column's (``score-pix+iut-frm``)
intervals and verdict. Prints the CPU seconds it used. Deterministic for the arguments.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import numpy.typing as npt

from benchcheck.report.stats import wilson
from benchcheck.stats.cluster import carrying_videos, cr2
from benchcheck.stats.student import t_quantile
from benchcheck.sweep.analysis import FRAMES_HI, FRAMES_LO, PIXELS_LO, BenchTable, Settings, _rng, bench_verdict
from benchcheck.sweep.constructed import CONDITIONS, World, world_answers
from benchcheck.sweep.verdict_stats import agresti_min_se, permutation_pvalue, score_difference_interval
from benchmarks.sweep_margin_skew import CASES, draw, scale_for, true_effect

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PIX_HI = CONDITIONS.index("v_32_s448")
PIX_LO = CONDITIONS.index(PIXELS_LO)
FRM_HI = [CONDITIONS.index(c) for c in FRAMES_HI if c in CONDITIONS]
FRM_LO = CONDITIONS.index(FRAMES_LO)
ALL_FPS = ("v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224")
RULES = ("wald", "score-pix", "cap-pix", "iut-frm", "score-pix+iut-frm", "cap-pix+iut-frm", "score-both")
# (pixels interval, frames interval, frames upper bound at alpha rather than alpha / H)
RULE_PARTS = {"wald": ("wald", "wald", False), "score-pix": ("score", "wald", False), "cap-pix": ("cap", "wald", False),
              "iut-frm": ("wald", "wald", True), "score-pix+iut-frm": ("score", "wald", True),
              "cap-pix+iut-frm": ("cap", "wald", True), "score-both": ("score", "score", False)}


# --- intervals (vectorized over the rungs of one effect) ---

@dataclass
class Rungs:
    """One effect's rungs (higher conditions) against its base, on one benchmark: per rung the
    estimate, CR2 SE and df, discordant counts; the per-video sums for the test; the 0/1 columns and
    videos (the product's score interval takes them)."""

    est: Array
    se: Array
    df: Array
    b: Array
    c: Array
    n: float
    carry: Array  # videos carrying the discordant answers (inf where none differs)
    sums: Array  # V x (H + 1) per-video sums of the raw 0/1 columns, base last (the test's input)
    cols: Array  # N x (H + 1) the 0/1 columns, base last
    vid: IntArray  # N video indices
    memo: dict[tuple[str, float], tuple[Array, Array]] = field(default_factory=dict)

    @classmethod
    def of(cls, right: IntArray, hi: Sequence[int], lo: int, vid: IntArray) -> Rungs:
        v = int(vid.max()) + 1
        # videos in the product's order (``BenchTable.clusters`` sorts their names, here "v<index>"),
        # so the permutation test draws the same permutations for the same videos
        order = np.array(sorted(range(v), key=lambda x: f"v{x}"), dtype=np.int64)
        vid = np.argsort(order)[vid]
        counts = np.bincount(vid, minlength=v).astype(np.float64)
        keep = counts > 0
        cols = right[:, [*hi, lo]].astype(np.float64)
        sums = np.stack([np.bincount(vid, weights=cols[:, k], minlength=v) for k in range(cols.shape[1])], axis=1)
        n = float(len(vid))
        est, se, df, bb, cc, carry = [], [], [], [], [], []
        for h in range(len(hi)):
            d = cols[:, h] - cols[:, -1]
            s_, df_ = cr2((sums[:, h] - sums[:, -1])[keep], counts[keep])
            est.append(float(d.mean()))
            se.append(s_)
            df.append(df_)
            bb.append(float((d > 0).sum()))
            cc.append(float((d < 0).sum()))
            carry.append(carrying_videos(np.bincount(vid, weights=(d != 0).astype(np.float64), minlength=v)[keep],
                                         counts[keep]))
        f = np.asarray
        return cls(f(est), f(se), f(df), f(bb), f(cc), n, f(carry), sums[keep].astype(np.float64), cols, vid)

    def t(self, alpha: float, cap: bool = False) -> Array:
        df = np.minimum(self.df, self.carry + 1.0) if cap else self.df
        return np.array([t_quantile(alpha / 2.0, max(float(d), 1.0)) for d in df])

    def interval(self, how: str, alpha: float) -> tuple[Array, Array]:
        """Each rung's two-sided ``1 - alpha`` interval (rounded as the product rounds)."""
        if (how, alpha) not in self.memo:
            self.memo[how, alpha] = self._interval(how, alpha)
        return self.memo[how, alpha]

    def _interval(self, how: str, alpha: float) -> tuple[Array, Array]:
        if how in ("wald", "cap"):
            t = self.t(alpha, how == "cap")
            floor = np.array([agresti_min_se(b, c, int(self.n)) for b, c in zip(self.b, self.c, strict=True)])
            half = t * np.maximum(self.se, floor)
            lo = np.where(np.isinf(half), -1.0, np.maximum(-1.0, self.est - half))
            hi = np.where(np.isinf(half), 1.0, np.minimum(1.0, self.est + half))
        else:  # the product's own interval, rung by rung
            v = int(self.vid.max()) + 1
            ivs = [score_difference_interval(self.cols[:, h], self.cols[:, -1], self.vid, v, alpha)
                   for h in range(len(self.est))]
            lo, hi = np.array([iv.lo for iv in ivs]), np.array([iv.hi for iv in ivs])
        return np.round(lo, 6).astype(np.float64), np.round(hi, 6).astype(np.float64)

    def effect(self, how: str, alpha: float, iut: bool) -> tuple[float, float, float]:
        """(estimate, lower, upper) of the effect, the max over the rungs (one rung: itself)."""
        h = len(self.est)
        lo, hi = self.interval(how, alpha / h)
        if iut and h > 1:
            hi = self.interval(how, alpha)[1]
        return float(self.est.max()), float(lo.max()), float(hi.max())


# --- one benchmark under every rule ---

@dataclass
class Outcome:
    verdict: str
    pixels: tuple[float, float, float]
    frames: tuple[float, float, float]


def decide_all(pix: Rungs, frm: Rungs, s: Settings, pvalue: Callable[[str], float],
               rules: Sequence[str] = RULES) -> dict[str, Outcome]:
    """Each rule's intervals and verdict (``analysis.decide`` on them); ``pvalue(effect)`` is asked
    only where some rule's interval lies above 0."""
    out = {}
    for rule in rules:
        pe = pix.effect(RULE_PARTS[rule][0], s.alpha, False)
        fe = frm.effect(RULE_PARTS[rule][1], s.alpha, RULE_PARTS[rule][2])
        hp = pe[1] > 0 and pvalue("pixels") <= s.test_alpha
        hf = fe[1] > 0 and pvalue("frames") <= s.test_alpha
        flat_p = -s.margin < pe[1] and pe[2] < s.margin
        flat_f = -s.margin < fe[1] and fe[2] < s.margin
        word = ("both" if hp and hf else "pixels" if hp else "frames" if hf else
                "neither" if flat_p and flat_f else "undetermined")
        out[rule] = Outcome(word, pe, fe)
    return out


def verdicts(right: IntArray, vid: IntArray, s: Settings, rules: Sequence[str] = RULES,
             frames_hi: Sequence[int] = FRM_HI) -> dict[str, Outcome]:
    effects = {"pixels": Rungs.of(right, [PIX_HI], PIX_LO, vid), "frames": Rungs.of(right, frames_hi, FRM_LO, vid)}
    p: dict[str, float] = {}

    def pvalue(name: str) -> float:  # the product's test, on the product's random stream
        if name not in p:
            r = effects[name]
            p[name] = permutation_pvalue(r.sums, r.n, s.n_perm, _rng(s, "B", name))
        return p[name]

    return decide_all(effects["pixels"], effects["frames"], s, pvalue, rules)


def check(right: IntArray, vid: IntArray, s: Settings, got: dict[str, Outcome], product_rule: str) -> None:
    """The product's ``bench_verdict`` on these answers gives ``product_rule``'s intervals and verdict."""
    rows = [{"bench": "B", "item_id": f"i{i}", "condition": c, "status": "ok", "correct": str(int(right[i, k])),
             "video_id": f"v{vid[i]}"} for k, c in enumerate(CONDITIONS) for i in range(len(vid))]
    v = bench_verdict(BenchTable("B", rows), s)
    want = got[product_rule]
    assert v.pixels is not None and v.frames is not None
    for name, iv, mine in (("pixels", v.pixels, want.pixels), ("frames", v.frames, want.frames)):
        assert abs(iv.est - mine[0]) < 1e-6 and abs(iv.lo - mine[1]) < 1e-6 and abs(iv.hi - mine[2]) < 1e-6, \
            (name, product_rule, iv, mine)
    assert v.verdict == want.verdict, (product_rule, v.verdict, want.verdict, v.reason)


# --- tallies ---

@dataclass
class Tally:
    n: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, flag: bool | float) -> None:
        if isinstance(flag, bool):
            self.counts[key] = self.counts.get(key, 0) + flag
        else:
            self.sums[key] = self.sums.get(key, 0.0) + flag

    def pct(self, key: str, ci: bool = False) -> str:
        k = self.counts.get(key, 0)
        text = f"{100 * k / self.n:.1f}"
        if ci:
            r = wilson(k, self.n)
            text += f" [{100 * (r.lo or 0):.1f}, {100 * (r.hi or 0):.1f}]"
        return text

    def mean(self, key: str) -> str:
        return f"{self.sums.get(key, 0.0) / self.n:.3f}"


def covers(iv: tuple[float, float, float], truth: float) -> bool:
    return iv[1] <= truth <= iv[2]


def run_rows(label: str, draws: Callable[[int], tuple[IntArray, IntArray, float]], runs: int, s: Settings,
             frames_truth: float, score: Callable[[Tally, str, Outcome, float], None], args: argparse.Namespace,
             frames_hi: Sequence[int] = FRM_HI) -> dict[str, Tally]:
    tallies = {r: Tally(runs) for r in RULES}
    for seed in range(runs):
        right, vid, pixels_truth = draws(seed)
        got = verdicts(right, vid, s, RULES, frames_hi)
        if seed < args.check:
            check(right, vid, s, got, args.product_rule)
        for r, o in got.items():
            t = tallies[r]
            t.add("pix_cov", covers(o.pixels, pixels_truth))
            t.add("frm_cov", covers(o.frames, frames_truth))
            t.add("pix_w", o.pixels[2] - o.pixels[1])
            t.add("frm_w", o.frames[2] - o.frames[1])
            t.add("neither", o.verdict == "neither")
            score(t, r, o, pixels_truth)
    return tallies


def no_extra(t: Tally, rule: str, o: Outcome, truth: float) -> None:
    return None


# --- parts ---

def part_skew(args: argparse.Namespace, s: Settings) -> None:
    print(f"\n## Skew: a true pixels effect of {s.margin:g} carried by a few videos ({args.skew_runs} runs per cell)\n")
    print("| cell | rule | upper < truth | lower > truth | upper < own videos' effect | neither (wrong) [95% CI] | "
          "pixels width | frames width |")
    print("|---|---|---|---|---|---|---|---|")
    for j, case in enumerate(CASES):
        d = scale_for(case, s.margin)
        truth = true_effect(case, d)
        own: list[float] = []

        def draws(seed: int, case: tuple[str, int, float, float] = case, j: int = j, d: float = d,
                  truth: float = truth, own: list[float] = own) -> tuple[IntArray, IntArray, float]:
            right, vid, gain = draw(*case, d, np.random.default_rng([j, seed]))
            own.append(float(gain.mean()))
            return right, vid, truth

        def extra(t: Tally, rule: str, o: Outcome, truth: float, own: list[float] = own) -> None:
            t.add("up_miss", o.pixels[2] < truth)
            t.add("lo_miss", o.pixels[1] > truth)
            t.add("own_miss", o.pixels[2] < own[-1])

        tallies = run_rows(case[0], draws, args.skew_runs, s, 0.0, extra, args)
        name = f"{case[1]} {case[0]}, acc {case[2]:g}, het {case[3]:g}"
        for r, t in tallies.items():
            print(f"| {name} | {r} | {t.pct('up_miss')} | {t.pct('lo_miss')} | {t.pct('own_miss')} | "
                  f"{t.pct('neither', True)} | {t.mean('pix_w')} | {t.mean('frm_w')} |", flush=True)


def world_draws(w: World, tag: int) -> Callable[[int], tuple[IntArray, IntArray, float]]:
    def draws(seed: int) -> tuple[IntArray, IntArray, float]:
        right, vid = world_answers(w, np.random.default_rng([tag, seed]))
        return right, vid.astype(np.int64), w.pixels
    return draws


def part_null(args: argparse.Namespace, s: Settings) -> None:
    print(f"\n## Null worlds: nothing changes accuracy ({args.runs} benchmarks of 300 items per row)\n")
    print("| world | videos | rule | false pixels / frames / both | neither (correct) | coverage pixels / frames | "
          "width pixels / frames |")
    print("|---|---|---|---|---|---|---|")

    def extra(t: Tally, rule: str, o: Outcome, truth: float) -> None:
        t.add("false", o.verdict in ("pixels", "frames", "both"))

    worlds = (("coin flips", World()), ("sticky, keep 0.8", World(kind="sticky", keep=0.8)),
              ("sticky, keep 0.95", World(kind="sticky", keep=0.95)))
    for j, (label, w0) in enumerate(worlds):
        for nv in (300, 30, 10):
            w = replace(w0, n_videos=nv)
            tallies = run_rows(label, world_draws(w, 7_000 + 1000 * j + nv), args.runs, s, 0.0, extra, args)
            for r, t in tallies.items():
                print(f"| {label} | {nv} | {r} | {t.pct('false')} | {t.pct('neither', True)} | "
                      f"{t.pct('pix_cov')} / {t.pct('frm_cov')} | {t.mean('pix_w')} / {t.mean('frm_w')} |", flush=True)


def part_power(args: argparse.Namespace, s: Settings) -> None:
    print(f"\n## Power: a planted effect, world sticky, keep 0.8 ({args.runs} benchmarks per row)\n")
    print("| planted | size | videos | rule | names it | exact | coverage pixels / frames |")
    print("|---|---|---|---|---|---|---|")
    base = World(kind="sticky", keep=0.8)
    cases = (("pixels", base, "pixels", 0.05), ("pixels", base, "pixels", 0.10),
             ("frames, one rung", base, "frames", 0.10),
             ("frames, all 5 rungs", replace(base, frames_rungs=ALL_FPS), "frames", 0.10))
    for j, (label, w0, which, size) in enumerate(cases):
        for nv in (300, 30, 10):
            w = replace(w0, n_videos=nv, pixels=size if which == "pixels" else 0.0,
                        frames=size if which == "frames" else 0.0)

            def extra(t: Tally, rule: str, o: Outcome, truth: float, which: str = which) -> None:
                t.add("names", o.verdict in (which, "both"))
                t.add("exact", o.verdict == which)

            tallies = run_rows(label, world_draws(w, 60_000 + 1000 * j + nv), args.runs, s, w.frames, extra, args)
            for r, t in tallies.items():
                print(f"| {label} | {size:+.2f} | {nv} | {r} | {t.pct('names')} | {t.pct('exact')} | "
                      f"{t.pct('pix_cov')} / {t.pct('frm_cov')} |", flush=True)


def part_margin(args: argparse.Namespace, s: Settings) -> None:
    print(f"\n## The margin: a true effect of {s.margin:g} on every video alike, the other effect none "
          f"({args.runs} benchmarks per row)\n")
    print("| effect at the margin | world | videos | rule | neither (wrong) [95% CI] | verdict names it | "
          "upper < truth |")
    print("|---|---|---|---|---|---|---|")
    rows = [("pixels", keep, World(kind="sticky", keep=keep, pixels=s.margin)) for keep in (0.95, 0.8)]
    rows += [(label, 0.95, World(kind="sticky", keep=0.95, frames=s.margin, frames_rungs=rungs))
             for label, rungs in (("frames, one rung", ("v_128_s224",)), ("frames, all 5 rungs", ALL_FPS))]
    for j, (label, keep, w0) in enumerate(rows):
        which = "pixels" if label == "pixels" else "frames"
        for nv in (300, 30, 10):
            w = replace(w0, n_videos=nv)

            def extra(t: Tally, rule: str, o: Outcome, truth: float, which: str = which) -> None:
                t.add("names", o.verdict in (which, "both"))
                t.add("up_miss", (o.pixels if which == "pixels" else o.frames)[2] < s.margin)

            tag = 90_000 + nv + int(100 * keep) + 1000 * (j >= 2) * j
            tallies = run_rows(label, world_draws(w, tag), args.runs, s, w.frames, extra, args)
            for r, t in tallies.items():
                print(f"| {label} | sticky, keep {keep:g} | {nv} | {r} | {t.pct('neither', True)} | {t.pct('names')} | "
                      f"{t.pct('up_miss')} |", flush=True)



def given_p(ps: dict[str, float | None], name: str) -> float:
    p = ps[name]
    return 1.0 if p is None else p


def part_demo(args: argparse.Namespace, s: Settings) -> None:
    """The demo's own sweep results (``--demo-csv``: a ``benchcheck demo run``'s
    ``sweep/results/conditions_results.csv``) under every rule, at the demo's settings."""
    from benchcheck.sweep.demo import DEMO_SETTINGS
    from benchcheck.sweep.results import read_csv

    d = DEMO_SETTINGS
    by: dict[str, list[dict[str, str]]] = {}
    for row in read_csv(args.demo_csv):
        by.setdefault(str(row["bench"]), []).append(row)
    print(f"\n## The demo ({args.demo_csv}; margin {d.margin:g})\n")
    print("| benchmark | rule | pixels | frames | verdict |")
    print("|---|---|---|---|---|")
    for bench in sorted(by):
        t = BenchTable(bench, by[bench])
        product = bench_verdict(t, d)
        pix_hi = next(c for c in ("v_32_s448", "v_32") if t.scores.get(c))
        effects = {}
        for name, hi, lo in (("pixels", [pix_hi], PIXELS_LO),
                             ("frames", [c for c in FRAMES_HI if t.scores.get(c)], FRAMES_LO)):
            items = t.common([*hi, lo])
            _, cl = t.clusters(items)
            effects[name] = Rungs.of(t.matrix(items, [*hi, lo]).astype(np.int64), list(range(len(hi))), len(hi), cl)
        ps = {"pixels": product.p_pixels, "frames": product.p_frames}  # the product's test: every rule's p-value
        got = decide_all(effects["pixels"], effects["frames"], d, partial(given_p, ps))
        assert got[args.product_rule].verdict == product.verdict, (bench, got[args.product_rule], product)
        for r, o in got.items():
            print(f"| {bench} | {r} | {o.pixels[0]:+.3f} [{o.pixels[1]:+.3f}, {o.pixels[2]:+.3f}] | "
                  f"{o.frames[0]:+.3f} [{o.frames[1]:+.3f}, {o.frames[2]:+.3f}] | {o.verdict} |")


PARTS = {"skew": part_skew, "null": part_null, "power": part_power, "margin": part_margin, "demo": part_demo}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--part", default="skew,null,power,margin")
    ap.add_argument("--runs", type=int, default=1000, help="benchmarks per null / power / margin row")
    ap.add_argument("--skew-runs", type=int, default=2000, help="benchmarks per skew cell")
    ap.add_argument("--demo-csv", help="part demo: a demo run's sweep/results/conditions_results.csv")
    ap.add_argument("--check", type=int, default=0, help="runs per row also checked against the product")
    ap.add_argument("--product-rule", default="score-pix+iut-frm", choices=RULES,
                    help="the rule the product implements")
    args = ap.parse_args()
    s = Settings()
    cpu0, wall0 = time.process_time(), time.time()
    print(f"# paired_difference_interval {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, settings {s}, "
          f"check {args.check} (product rule {args.product_rule})")
    for part in args.part.split(","):
        t0 = time.process_time()
        PARTS[part](args, s)
        print(f"\n{part}: CPU {time.process_time() - t0:.0f} s")
    print(f"\nCPU {time.process_time() - cpu0:.0f} s, wall {time.time() - wall0:.0f} s")


if __name__ == "__main__":
    main()
