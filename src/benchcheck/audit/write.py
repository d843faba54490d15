"""The audit's outputs: one CSV per table and ``audit.md`` that reads them out."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from benchcheck.atomic import write_text_atomic
from benchcheck.audit.fdr import ALL
from benchcheck.audit.null import chance_removals, expected_removals, verdict
from benchcheck.audit.rule import rule_text
from benchcheck.audit.run import AuditResult
from benchcheck.protocol import LETTERS, LOG2
from benchcheck.screen.steps import STEPS
from benchcheck.stats.confidence import Confidence
from benchcheck.step0.probe_stamp import Pairs, stale_note
from benchcheck.step0.scope import not_deduplicated_note


def csv_text(rows: Sequence[dict[str, object]]) -> str:
    buf = io.StringIO()
    if rows:
        fields: list[str] = []
        for r in rows:
            fields += [k for k in r if k not in fields]
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def _step_name(s: int) -> str:
    return f"{s} {STEPS[s].name}" if s in STEPS else str(s)


def _pct(v: object) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, float | int) else ""


def _num(v: object, fmt: str = "+.3f") -> str:
    return format(v, fmt) if isinstance(v, float | int) else ""


def _interval(value: object, lo: object, hi: object, missing: str, fmt: str = "+.3f") -> str:
    """``value [lo, hi]``; where no interval exists (one video, one item), ``missing`` says why,
    never empty brackets that read as a broken table."""
    if isinstance(lo, float | int) and isinstance(hi, float | int):
        return f"{_num(value, fmt)} [{_num(lo, fmt)}, {_num(hi, fmt)}]"
    return f"{_num(value, fmt)} ({missing})"


def _shift(mean: object, largest: object) -> str:
    """The floor's margin shift; none without ``lp_exact`` rows to measure it on."""
    if not isinstance(mean, float | int) or not isinstance(largest, float | int):
        return "n/a"
    return f"{_num(mean, '+.2f')}, {_num(largest, '+.2f')}"


NEARLY_ALL = 0.9  # "nearly all" removals: the null expects at least this share of them


def headline(res: AuditResult) -> str:
    """One plain sentence: how many of the removals the null expects (the conditioned null, pooled
    over the cells, with its 95 % interval), and what the cells called at the false-discovery level
    (Benjamini-Hochberg over every benchmark x step) say about them."""
    removed = sum(r.observed for r in res.nulls)
    if not removed:
        return "The rule removed no item, so there is nothing for the null to explain."
    expected, lo, hi = expected_removals(res.nulls)
    share = expected / removed
    head = f"The null expects {expected:.1f} [{lo}, {hi}] of the {removed} removals ({min(share, 1.0):.0%})"
    called = [r for r in res.nulls if r.called]
    cells = f"{len(res.nulls)} benchmark x step cell{'s' if len(res.nulls) != 1 else ''}"
    level = f"FDR {res.fdr_level:g}"
    if not called:
        if share >= NEARLY_ALL and sum(r.null_if_shortcuts for r in res.nulls) >= NEARLY_ALL * removed:
            # The permutation null would expect as many had every removal been a shortcut: its
            # golds cannot move (one option, or one item), so it says nothing either way.
            return (f"{head}, but the permutation null would expect as many were every removal a shortcut (the "
                    f"golds sit at one option, or too few items to permute), so these rows cannot tell chance "
                    f"from shortcuts (none of the {cells} removes more than its null at {level}).")
        if share >= NEARLY_ALL:
            return (f"{head}: chance and the model's letter preference explain nearly all of them; treat them as "
                    f"noise (none of the {cells} removes more than its null at {level}).")
        return (f"{head}; none of the {cells} removes more than its null at {level}, so no removal is shown to "
                f"rest on a shortcut (too few items, or too few removals beyond chance, to tell).")
    was = {(int(str(r["step"])), str(r["item_id"])): bool(r["removed"]) for r in res.items}
    est, e_lo, e_hi = chance_removals([(p, was.get((r.step, i), False)) for r in res.nulls
                                       for i, p in r.item_p.items()])
    verb = "removes more than its" if len(called) == 1 else "remove more than their"
    return (f"{head}; {len(called)} of the {cells} {verb} null (Benjamini-Hochberg at {level}); "
            f"counting only the items that are not shortcuts, an estimated {est:.1f} [{e_lo:.1f}, {e_hi:.1f}] "
            f"of them are chance, so about {max(0.0, removed - est):.0f} rest on a shortcut.")


def unaudited_line(benches: Sequence[str]) -> str:
    return (f"Not audited: {len(benches)} benchmark{'s' * (len(benches) != 1)} of the items given "
            f"{'have' if len(benches) != 1 else 'has'} no ok row with letter log-probs (only errors, or not "
            f"screened): {', '.join(benches)}.")


def step0_line(removed: int) -> str:
    return (f"Step 0: {removed} duplicate{'s' * (removed != 1)} it removed {'are' if removed != 1 else 'is'} left "
            "out of every table (the chain never screened them; rows of copies screened anyway are no evidence).")


def markdown(res: AuditResult) -> str:
    lines = ["# How far to trust each removal", "",
             "Evidence beside the protocol's decisions; nothing here changes a decision.", "",
             f"**{headline(res)}**", "", *([unaudited_line(res.unaudited), ""] if res.unaudited else []),
             *([step0_line(res.step0_removed), ""] if res.step0_removed is not None else []),
             *([not_deduplicated_note(res.not_deduplicated), ""] if res.not_deduplicated else []),
             f"Rule: {rule_text()}.", "", "## Null of the rule", "",
             "Permutation null: gold answers permuted within each benchmark (unconditioned). Conditioned null: "
             "at step 1 the gold equally likely at any option (the options are shuffled), at the other steps drawn "
             "from the benchmark's gold distribution, and in both restricted to the golds that pass the earlier "
             "steps; its p-value is exact (Poisson-binomial) and the excesses are called with Benjamini-Hochberg "
             f"at FDR {res.fdr_level:g} over the {len(res.nulls)} cells.", "",
             "| bench | step | items | removed | observed | permutation null [95%] | conditioned null [95%] | p | "
             "BH-adjusted | excess called | est. chance removals [95%] | reading |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res.nulls:
        adj = "" if r.p_adjusted is None else f"{r.p_adjusted:.3g}"
        lines.append(f"| {r.bench} | {_step_name(r.step)} | {r.n} | {r.observed} | {_pct(r.observed_rate)} | "
                     f"{_pct(r.null_mean)} [{_pct(r.null_lo)}, {_pct(r.null_hi)}] | "
                     f"{_pct(r.cond_mean)} [{_pct(r.cond_lo)}, {_pct(r.cond_hi)}] | {r.p_value:.3g} | {adj} | "
                     f"{'yes' if r.called else 'no'} | "
                     f"{r.est_false:.1f} [{r.est_false_lo:.1f}, {r.est_false_hi:.1f}] | {verdict(r)} |")
    total_obs = sum(r.observed for r in res.nulls)
    if total_obs:
        total_null, lo, hi = expected_removals(res.nulls)
        perm = sum(r.null_mean * r.n for r in res.nulls)
        lines += ["", f"Over all benchmarks and steps: {total_obs} removals; chance and letter preference "
                      f"alone would give {total_null:.1f} [{lo}, {hi}] ({min(1.0, total_null / total_obs):.0%} of "
                      f"them) under the conditioned null; the permutation null, which does not condition on the "
                      f"steps an item passed, expects {perm:.1f}."]
    lines += fdr_lines(res)
    lines += ["", "## Letter prior", "", "| model | step | k | source | forwards | dominant | prior margin of "
              "dominant | P(position) | pick share |", "|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(res.priors.values(), key=lambda p: (p.step, p.model, p.k)):
        probs = " ".join(f"{v:.2f}" for v in p.probs)
        picks = " ".join(f"{c / p.forwards:.2f}" for c in p.picks)
        unident = "".join(LETTERS[i] for i, ok in enumerate(p.identified) if not ok)
        source = p.source + (f" ({p.censored} floored letters censored)" if p.censored else "") + (
            f"; no prior identified at {unident}" if unident else "")
        lines.append(f"| {p.model} | {_step_name(p.step)} | {p.k} | {source} | {p.forwards} | "
                     f"{LETTERS[p.dominant]} | {p.margin_at(p.dominant):.2f} | {probs} | {picks} |")
    lines += ["", "| bench | step | removed | prior explains | PriDe-corrected removals | flips to kept | "
              "flips to removed |", "|---|---|---|---|---|---|---|"]
    for e in res.prior_effects:
        lines.append(f"| {e['bench']} | {_step_name(int(str(e['step'])))} | {e['removed']} | {e['prior_explained']} | "
                     f"{e['corrected_removed']} | {e['flips_to_kept']} | {e['flips_to_removed']} |")
    lines += ["", "## Per-item confidence", "",
              "Share of decisions by confidence (1 - probability that re-asking flips it); "
              "`audit_items.csv` has every item.", "",
              "| bench | step | removed | removed, confidence >= 0.9 | removed, confidence < 0.5 | noise sd | method |",
              "|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, int], list[Confidence]] = {}
    for c in res.confidences:
        groups.setdefault((c.bench, c.step), []).append(c)
    for (bench, step), cs in sorted(groups.items()):
        rm = [c for c in cs if c.removed]
        hi = sum(1 for c in rm if c.confidence is not None and c.confidence >= 0.9)
        lo = sum(1 for c in rm if c.confidence is not None and c.confidence < 0.5)
        sd = next((c.noise_sd for c in cs if c.noise_sd), None)
        lines.append(f"| {bench} | {_step_name(step)} | {len(rm)} | {hi} | {lo} | {_num(sd, '.3f')} "
                     f"| {cs[0].method} |")
    lines += ["", "## Threshold sensitivity (removal rate)", "",
              "| bench | step | t=0 | 0.5 | log 2 | 1.0 | 1.5 | 2.0 | 3.0 |", "|---|---|---|---|---|---|---|---|---|"]
    curve: dict[tuple[str, int], dict[float, object]] = {}
    for t in res.thresholds:
        curve.setdefault((str(t["bench"]), int(str(t["step"]))), {})[round(float(str(t["threshold"])), 4)] = t["rate"]
    for (bench, step), rates in sorted(curve.items()):
        cells = " | ".join(_pct(rates.get(x)) for x in (0.0, 0.5, round(LOG2, 4), 1.0, 1.5, 2.0, 3.0))
        lines.append(f"| {bench} | {_step_name(step)} | {cells} |")
    lines += ["", "## Exact letter scores and the top-20 floor", "",
              "| bench | step | rows | with lp_exact | with a floored letter | decisions that differ | "
              "margin shift from the floor (mean, largest) |", "|---|---|---|---|---|---|---|"]
    for f in res.floor:
        lines.append(f"| {f['bench']} | {_step_name(int(str(f['step'])))} | {f['rows']} | {f['with_exact']} | "
                     f"{f['floored']} | {f['decisions_differ'] if f['with_exact'] else 'n/a (no lp_exact)'} | "
                     f"{_shift(f['mean_margin_shift'], f['max_margin_shift'])} |")
    if res.agreement:
        lines += ["", "## Cross-model agreement", "", "| step | bench | model A | model B | items | removed A | "
                  "removed B | both | kappa [95%] | bootstrap resamples undefined |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for a in res.agreement:
            k = "" if a.kappa is None else _interval(a.kappa, a.lo, a.hi, "no interval", ".3f")
            lines.append(f"| {_step_name(a.step)} | {a.bench} | {a.model_a} | {a.model_b} | {a.items} | "
                         f"{a.removed_a} | {a.removed_b} | {len(a.both)} | {k} | {a.boot_undefined} of {a.boot} |")
    lines += ["", "## Shortcut profile (accuracy differences, 95% intervals clustered by video)", "",
              "| bench | figure | items | videos | chance baseline | value [95%] |", "|---|---|---|---|---|---|"]
    for g in res.profile:
        val = ("no rows" if g.value is None else
               _interval(g.value, g.lo, g.hi, f"no interval: {g.videos} video{'s' * (g.videos != 1)}, too few"))
        lines.append(f"| {g.bench} | {g.name} | {g.items} | {g.videos} | {_num(g.baseline, '.3f')} | {val} |")
    return "\n".join(lines) + "\n"


FDR_SHOWN = (round(LOG2, 4), 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)  # thresholds audit.md shows (the CSV has all)


def fdr_lines(res: AuditResult) -> list[str]:
    """The false-discovery curve over every benchmark and step, and the --target-fdr answer."""
    pooled = sorted((c for c in res.fdr_curve if c.bench == ALL), key=lambda c: c.threshold)
    if not pooled:
        return []
    lines = ["", "## False-discovery curve (removals with a margin above a stricter threshold)", "",
             "Estimated share of chance removals among the removals whose margin clears the threshold, with a 97.5 % "
             "upper bound (exact); every benchmark and step together (`audit_fdr.csv` has each cell).", "",
             "| margin > | removals kept | est. chance | est. FDR | FDR upper bound |", "|---|---|---|---|---|"]
    chosen = {t.threshold for t in res.fdr_targets if t.bench == ALL and t.threshold is not None}
    for c in pooled:
        if round(c.threshold, 4) in FDR_SHOWN or c.threshold in chosen:
            lines.append(f"| {c.threshold:.3g} | {c.removed} | {c.est_false:.1f} | {_pct(c.fdr)} | {_pct(c.fdr_hi)} |")
    for t in res.fdr_targets:
        if t.bench == ALL:
            lines += ["", t.sentence()]
    return lines


PROBE_HEADING = "## Text-only probe and label-error flags"


def stale_probe_note(probe_dir: str | Path | None, step0: Pairs | None = None) -> str | None:
    """One sentence when ``probe_dir`` holds a probe made with another step-0 outcome than the
    audit's (``step0``: the items the audit left out at step 0, as (bench, item id) pairs; None:
    no ``--step0``), which ``audit.md`` then leaves out; None when it has none or the same."""
    return stale_note(probe_dir, step0, "Add --probe to this audit to rerun it with the audit's step 0, or give "
                                        "the audit the --step0 the probe ran with.")


def probe_section(probe_dir: str | Path | None, step0: Pairs | None = None) -> str:
    """``benchcheck probe``'s reading (its ``probe.md``, headings one level down) as a section of
    ``audit.md``; empty when the probe has not run, and one note in its place when the probe left
    out other items at step 0 than the audit (``stale_probe_note``): a probe over duplicates the
    audit leaves out, or without those it counts, is no reading of the audited items."""
    if probe_dir is None:
        return ""
    note = stale_probe_note(probe_dir, step0)
    if note is not None:
        return "\n".join(["", PROBE_HEADING, "", note]) + "\n"
    try:
        text = (Path(probe_dir) / "probe.md").read_text(encoding="utf-8")
    except OSError:
        return ""
    body = [("#" + line if line.startswith("#") else line) for line in text.splitlines()[1:]]
    return "\n".join(["", PROBE_HEADING, f"From `{probe_dir}` (docs/probe.md).", *body]) + "\n"


OPTIONAL_TABLES = ("audit_fdr_target.csv", "audit_agreement.csv", "audit_agreement_both.csv")


def write_audit(res: AuditResult, out: str | Path, probe_dir: str | Path | None = None,
                step0: Pairs | None = None) -> list[Path]:
    """Write every table as CSV plus ``audit.md`` under ``out``; returns the paths written. With
    ``probe_dir`` (a ``benchcheck probe`` folder), ``audit.md`` ends with the probe's section, when
    the probe left out at step 0 the items the audit left out (``step0``, ``probe_section``)."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    tables = {
        "audit_null.csv": [r.record() for r in res.nulls],
        "audit_priors.csv": [p.record() for p in res.priors.values()],
        "audit_prior_effects.csv": res.prior_effects,
        "audit_items.csv": res.items,
        "audit_thresholds.csv": res.thresholds,
        "audit_floor.csv": res.floor,
        "audit_profile.csv": [g.record() for g in res.profile],
        "audit_fdr.csv": [c.record() for c in res.fdr_curve],
    }
    if res.target_fdr is not None:
        tables["audit_fdr_target.csv"] = [t.record() for t in res.fdr_targets]
    if res.agreement:
        tables["audit_agreement.csv"] = [a.record() for a in res.agreement]
        tables["audit_agreement_both.csv"] = [{"step": a.step, "item_id": i} for a in res.agreement
                                              if a.bench == "*" for i in a.both]
    paths = []
    for name, rows in tables.items():
        write_text_atomic(d / name, csv_text(rows))
        paths.append(d / name)
    # an earlier run's optional table (another --target-fdr or --compare) would be read, by the
    # report among them, as this run's
    for name in OPTIONAL_TABLES:
        if name not in tables:
            (d / name).unlink(missing_ok=True)
    write_text_atomic(d / "audit.md", markdown(res) + probe_section(probe_dir, step0))
    paths.append(d / "audit.md")
    return paths
