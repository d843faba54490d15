"""The audit's estimators against worlds of known truth, over many seeds (docs/audit.md).

Prints five tables:
1. letter prior: precision and recall of the prior-explained flag (prior_prob > 0.5) against the
   removals the true prior drives, and the fitted prior's error, for 2, 4 and 26 options, a model
   that lists two letters, golds all at one position;
2. per-item confidence: reliability (claimed flip probability against the observed flip of a
   fresh re-ask, per bin), expected calibration error, and the AUC of true vs false removals of
   the confidence, the raw mean margin and the former resampled confidence;
3. kappa: coverage of the 95 % interval (Jeffreys-Dirichlet posterior; the former percentile
   bootstrap beside it, its undefined resamples and its [1, 1] intervals);
4. shortcut profile: how often the options-only gap's interval covers 0 on pure noise with
   skewed golds (chance baseline from the prior against 1/k), and how often it excludes 0 with
   true shortcuts;
5. a removal rate's interval clustered by video: coverage of the true rate.

    PYTHONPATH=src python -m benchmarks.audit_calibration [--seeds 20] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import platform
import time
from collections.abc import Callable, Iterator

import numpy as np

from benchcheck.audit.agreement import bootstrap, posterior_interval
from benchcheck.audit.prior import EXPLAINED_CUT, estimate_priors, prior_probability
from benchcheck.audit.profile import accuracy, profile
from benchcheck.audit.worlds import World, WorldSpec, build_world, log_prior
from benchcheck.stats.cluster import mean_interval, rate_interval, wilson
from benchcheck.stats.confidence import Confidence, auc, confidences

BINS = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0001)
A4 = log_prior([0.55, 0.15, 0.15, 0.15])


def _timed(name: str, fn: Callable[[], None]) -> None:
    t0, w0 = time.process_time(), time.perf_counter()
    fn()
    print(f"({name}: {time.process_time() - t0:.1f} CPU s, {time.perf_counter() - w0:.1f} s wall)\n")


def prior_table(seeds: int) -> None:
    cases = {
        "4 options, step 1 (permutations)": WorldSpec(n=300, k=4, prior=A4),
        "4 options, single forward": WorldSpec(n=300, k=4, multi=False, prior=A4),
        "2 options, single forward": WorldSpec(n=300, k=2, multi=False, prior=log_prior([0.7, 0.3])),
        "26 options, single forward (6+ floored)": WorldSpec(n=300, k=26, multi=False, prior=[1.5] + [0.0] * 25),
        "4 options, model lists 2 letters": WorldSpec(n=300, k=4, multi=False, listed=2, prior=A4),
        "4 options, lists 2 letters, step 1": WorldSpec(n=300, k=4, listed=2, prior=A4),
        "golds all at A, no prior": WorldSpec(n=300, k=4, multi=False, gold_dist=[1, 0, 0, 0]),
        "golds all at A, prior on A": WorldSpec(n=300, k=4, multi=False, gold_dist=[1, 0, 0, 0], prior=A4),
    }
    print(f"## 1. Letter prior: prior-explained removals (flag: prior_prob > {EXPLAINED_CUT}), {seeds} seeds x "
          "300 items, 20 % shortcuts (+4 nats)\n")
    print("| construction | prior-driven (truth) | flagged | precision | recall | no probability (unidentified) "
          "| Brier | max prior error, identified positions (nats) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, spec in cases.items():
        tp = fp = fn = none = 0
        brier: list[float] = []
        err: list[float] = []
        for s in range(seeds):
            w = build_world(spec, s)
            prior = estimate_priors(w.rows)[(spec.model, w.step, spec.k)]
            true = np.asarray(spec.prior if spec.prior is not None else [0.0] * spec.k, dtype=float)
            ident = np.array(prior.identified, dtype=bool)
            if ident.any():  # over the identified positions, each side centred on them
                fit, tru = prior.centred[ident], true[ident]
                err.append(float(np.abs((fit - fit.mean()) - (tru - tru.mean())).max()))
            d = prior.draws()
            for f in w.rows:
                if not f.removed:
                    continue
                p = prior_probability(f, prior, d)
                truth = f.item_id in w.prior_driven
                if p is None:
                    none += 1
                    fn += truth
                    continue
                brier.append((p - truth) ** 2)
                flag = p > EXPLAINED_CUT
                tp += flag and truth
                fp += flag and not truth
                fn += truth and not flag
        prec = f"{tp / (tp + fp):.3f}" if tp + fp else "n/a"
        rec = f"{tp / (tp + fn):.3f}" if tp + fn else "n/a"
        print(f"| {name} | {tp + fn} | {tp + fp} | {prec} | {rec} | {none} | "
              f"{np.mean(brier) if brier else float('nan'):.3f} | {np.mean(err):.3f} |")


def ece_table(claimed: np.ndarray, observed: np.ndarray) -> tuple[float, list[tuple[float, float, int, float, float]]]:
    """Expected calibration error over ``BINS`` (|claimed - observed| weighted by the decisions in
    each), and each bin's (low, high, decisions, mean claimed, observed rate)."""
    out, rows = 0.0, []
    for a, b in itertools.pairwise(BINS):
        sel = (claimed >= a) & (claimed < b)
        if sel.any():
            rows.append((a, min(b, 1.0), int(sel.sum()), float(claimed[sel].mean()), float(observed[sel].mean())))
            out += sel.mean() * abs(claimed[sel].mean() - observed[sel].mean())
    return out, rows


def reask_claims(spec: WorldSpec, seeds: int) -> Iterator[tuple[World, list[Confidence]]]:
    """Each world of seeds 0..seeds-1 and the confidences of its step's decisions, to hold against
    its fresh re-ask (``World.reask_removed``); a single-forward step takes its noise from the same
    model's step 1 (a world of another seed)."""
    for s in range(seeds):
        w = build_world(spec, s)
        by = {w.step: w.rows}
        if not spec.multi:
            by[1] = build_world(dataclasses.replace(spec, multi=True), s + 1000).rows
        yield w, [c for c in confidences(by) if c.step == w.step]


def confidence_table(seeds: int) -> None:
    cases = {
        "step 1, prior 0.4 on A, noise 0.5": WorldSpec(n=600, k=4, prior=log_prior([0.4, 0.2, 0.2, 0.2])),
        "step 1, no prior, noise 1.0": WorldSpec(n=600, k=4, noise_sd=1.0),
        "step 1, 2 options, noise 0.8": WorldSpec(n=600, k=2, noise_sd=0.8),
        "single forward, noise 0.5": WorldSpec(n=600, k=4, multi=False),
        "single forward, prior 0.4 on A": WorldSpec(n=600, k=4, multi=False, prior=log_prior([0.4, 0.2, 0.2, 0.2])),
        "single forward, noise 1.0": WorldSpec(n=600, k=4, multi=False, noise_sd=1.0),
    }
    print(f"## 2. Per-item confidence: claimed flip probability vs a fresh re-ask, {seeds} seeds x 600 items, "
          "20 % shortcuts\n")
    summary = []
    for name, spec in cases.items():
        claimed, observed, removed = [], [], []
        a_conf, a_margin, a_old = [], [], []
        for w, cs in reask_claims(spec, seeds):
            for c in cs:
                claimed.append(c.flip_prob)
                observed.append(w.reask_removed[c.item_id] != c.removed)
                removed.append(c.removed)
            true = [c for c in cs if c.removed and c.item_id in w.shortcut]
            false = [c for c in cs if c.removed and c.item_id not in w.shortcut]
            # ranked by -flip_prob: 1 - flip_prob rounds a tail below 1e-16 to a tie at 1.0
            a_conf.append(auc([-(c.flip_prob or 0.0) for c in true], [-(c.flip_prob or 0.0) for c in false]))
            a_margin.append(auc([c.margin for c in true], [c.margin for c in false]))
            if spec.multi:
                a_old.append(auc([1 - (c.resampled_flip or 0.0) for c in true],
                                 [1 - (c.resampled_flip or 0.0) for c in false]))
        cl, ob, rm = np.array(claimed, dtype=float), np.array(observed), np.array(removed)
        e_all, rows = ece_table(cl, ob)
        e_rm, _ = ece_table(cl[rm], ob[rm])
        print(f"**{name}** (all decisions; ECE {e_all:.3f}, removals only {e_rm:.3f})\n")
        print("| claimed flip | decisions | mean claimed | observed flip rate |")
        print("|---|---|---|---|")
        for a, b, n, mean_claimed, o in rows:
            print(f"| [{a:.2f}, {b:.2f}) | {n} | {mean_claimed:.3f} | {o:.3f} |")
        print()

        def mean(xs: list[float | None]) -> str:
            v = [x for x in xs if x is not None]
            return f"{np.mean(v):.3f}" if v else "n/a"
        summary.append(f"| {name} | {e_all:.3f} | {e_rm:.3f} | {mean(a_conf)} | {mean(a_margin)} | {mean(a_old)} |")
    print("| world | ECE (all) | ECE (removals) | AUC confidence | AUC mean margin | AUC former resampling |")
    print("|---|---|---|---|---|---|")
    print("\n".join(summary))


def kappa_table(reps: int) -> None:
    print(f"## 3. Kappa: 95 % interval coverage of the population kappa, {reps} tables per cell\n")
    print("| items | prevalence | kappa | Jeffreys-Dirichlet | former bootstrap | its undefined resamples | "
          "its [1, 1] |")
    print("|---|---|---|---|---|---|---|")
    for n, prev, kap in itertools.product((5, 20, 50, 300), (0.1, 0.3), (0.2, 0.6, 0.9)):
        p = [prev * prev + kap * prev * (1 - prev), prev * (1 - prev) * (1 - kap), prev * (1 - prev) * (1 - kap),
             (1 - prev) ** 2 + kap * prev * (1 - prev)]
        rng = np.random.default_rng(n * 1000 + int(prev * 100) + int(kap * 10))
        cov_p = cov_b = undefined = ones = 0
        for r in range(reps):
            c = rng.choice(4, n, p=p)
            a, b = (c == 0) | (c == 1), (c == 0) | (c == 2)
            ab = posterior_interval(a, b, seed=r, draws=2000)
            cov_p += ab is not None and ab[0] <= kap <= ab[1]
            lo, hi, u = bootstrap(a, b, 500, r)
            undefined += u
            cov_b += lo is not None and hi is not None and lo <= kap <= hi
            ones += lo == 1.0 and hi == 1.0
        print(f"| {n} | {prev} | {kap} | {cov_p / reps:.3f} | {cov_b / reps:.3f} | {undefined / reps / 500:.1%} | "
              f"{ones / reps:.1%} |")


def profile_table(seeds: int) -> None:
    base = WorldSpec(n=300, k=4, multi=False, shortcut_share=0.0, gold_dist=[0.7, 0.1, 0.1, 0.1],
                     prior=log_prior([0.5, 0.5 / 3, 0.5 / 3, 0.5 / 3]))
    cases = {
        "noise, golds 70 % A, prior on A, 300 videos": base,
        "same, 100 videos (shared bias and gold)": dataclasses.replace(base, videos=100, video_sd=0.3,
                                                                       video_gold_share=0.3),
        "same, 30 videos": dataclasses.replace(base, videos=30, video_sd=0.5, video_gold_share=0.5),
        "noise, uniform golds, no prior, 300 videos": dataclasses.replace(base, gold_dist=None, prior=None),
        "10 % shortcuts (+4 nats), 100 videos": dataclasses.replace(base, shortcut_share=0.1, videos=100,
                                                                    video_sd=0.3, video_gold_share=0.3),
        "30 % shortcuts, 100 videos": dataclasses.replace(base, shortcut_share=0.3, videos=100, video_sd=0.3,
                                                          video_gold_share=0.3),
    }
    print(f"## 4. Shortcut profile: options-only gap, {seeds} seeds x 300 items\n")
    print("| world | interval covers 0 (prior baseline, clustered) | mean gap | mean baseline | "
          "covers 0 (1/k, clustered) | covers 0 (1/k, former iid bootstrap) |")
    print("|---|---|---|---|---|---|")
    for name, spec in cases.items():
        cov = cov_k = cov_old = 0
        vals, bases = [], []
        for s in range(seeds):
            w = build_world(spec, s)
            (g,) = [g for g in profile({4: w.rows}, seed=s) if g.name == "options_only_gap"]
            assert g.lo is not None and g.hi is not None and g.value is not None and g.baseline is not None
            cov += g.lo <= 0 <= g.hi
            vals.append(g.value)
            bases.append(g.baseline)
            d = np.array([accuracy(f) - 0.25 for f in w.rows])
            _, lo, hi = mean_interval(d, [f.video for f in w.rows])
            cov_k += lo is not None and hi is not None and lo <= 0 <= hi
            means = d[np.random.default_rng(s).integers(0, len(d), (1000, len(d)))].mean(axis=1)
            cov_old += bool(np.quantile(means, 0.025) <= 0 <= np.quantile(means, 0.975))
        print(f"| {name} | {cov}/{seeds} | {np.mean(vals):+.3f} | {np.mean(bases):.3f} | {cov_k}/{seeds} | "
              f"{cov_old}/{seeds} |")


def rate_table(reps: int) -> None:
    print(f"## 5. A removal rate's 95 % interval clustered by video: coverage of the true rate, {reps} runs\n")
    print("| items | videos | within-video correlation | clustered Wilson | independent Wilson "
          "| mean width (clustered) |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(5)
    for n, g, rho in ((300, 300, 0.0), (300, 30, 0.2), (300, 10, 0.2), (300, 30, 0.6), (100, 2, 0.3), (20, 5, 0.3)):
        rate = 0.2
        cov_c = cov_i = 0
        width = []
        for _ in range(reps):
            if rho > 0:  # per-video rates Beta with mean 0.2 and intra-class correlation rho
                ab = (1 - rho) / rho
                pv = rng.beta(rate * ab, (1 - rate) * ab, g)
            else:
                pv = np.full(g, rate)
            video = np.arange(n) % g
            y = rng.random(n) < pv[video]
            lo, hi = rate_interval(y, [str(v) for v in video])
            assert lo is not None and hi is not None
            cov_c += lo <= rate <= hi
            width.append(hi - lo)
            li, hi_i = wilson(float(y.sum()), n)
            cov_i += li <= rate <= hi_i
        print(f"| {n} | {g} | {rho} | {cov_c / reps:.3f} | {cov_i / reps:.3f} | {np.mean(width):.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="a few seeds per table (a smoke run)")
    args = ap.parse_args()
    seeds = 3 if args.quick else args.seeds
    print(f"# audit_calibration: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{platform.machine()}, {seeds} seeds\n")
    _timed("prior", lambda: prior_table(seeds))
    _timed("confidence", lambda: confidence_table(max(seeds // 2, 2)))
    _timed("kappa", lambda: kappa_table(20 * seeds))
    _timed("profile", lambda: profile_table(5 * seeds))
    _timed("rates", lambda: rate_table(50 * seeds))


if __name__ == "__main__":
    main()
