"""``benchcheck audit``: how far to trust each removal (evidence beside the decisions)."""

from __future__ import annotations

import click

from benchcheck.cli.common import (
    SEED,
    CliPath,
    FiniteFloatRange,
    die,
    load_items_reporting,
    need_step_results,
    step0_option,
)


@click.command("audit")
@click.option("--results", type=CliPath(file_okay=False), required=True,
              help="Screening results folder (step<k>/<bench>.jsonl).")
@click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
              help="Item files or folders of the audited pool (repeatable); rows of other items are ignored.")
@click.option("--out", type=CliPath(file_okay=False), required=True,
              help="Output folder: audit.md and one audit_*.csv per table.")
@click.option("--compare", type=CliPath(file_okay=False), default=None,
              help="A second results folder (a step run with another model) for cross-model agreement.")
@click.option("--rounds", type=click.IntRange(10, 1_000_000), default=1000, show_default=True,
              help="Rounds of the permutation null (p-values resolve to 1/rounds).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the null and the bootstraps.")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True,
              help="The order the steps ran in (an item's chance removal is conditioned on the steps it passed).")
@click.option("--fdr-level", type=FiniteFloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05,
              show_default=True, help="False-discovery level at which excesses over the null are called "
              "(Benjamini-Hochberg over every benchmark x step).")
@click.option("--target-fdr", type=FiniteFloatRange(0.0, 1.0, min_open=True, max_open=True), default=None,
              help="Name the smallest margin threshold whose false-discovery upper bound is at most this, and what "
                   "it keeps (audit_fdr_target.csv).")
@click.option("--probe", "with_probe", is_flag=True,
              help="Also run the text-only probe and the label flags (benchcheck probe's defaults) into RESULTS/probe.")
@click.option("--step0", "step0", type=CliPath(exists=True), default=None,
              help="Step-0 output folder of `benchcheck dedup` (or the kept list given to screen --keep): its "
                   "duplicates are left out of the audit and of --probe, as the chain never screened them.")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--quiet", is_flag=True, help="No per-item problem lines.")
def audit(results: str, item_paths: tuple[str, ...], out: str, compare: str | None, rounds: int, seed: int,
          chain: str, fdr_level: float, target_fdr: float | None, with_probe: bool, step0: str | None,
          columns: str | None, quiet: bool) -> None:
    """Audit the removals of a screening run from its recorded rows (no new forwards).

    Per benchmark x step: the removal rule's permutation null (gold answers permuted within the
    benchmark) and its conditioned null against the observed rate, with a p-value and the
    excesses called by Benjamini-Hochberg at --fdr-level; the false-discovery curve of the
    removals against a stricter margin threshold (--target-fdr names the smallest that reaches
    the target); the letter prior and the removals it alone explains,
    PriDe-corrected decisions, per-item confidence, removal rate against the threshold (0-3
    nats), decisions that depend on the top-20 floor, and a shortcut profile per benchmark;
    with --compare, Cohen's kappa between two runs' removals. Never changes a decision.
    With --step0, the duplicates step 0 removed are left out (rows of copies screened anyway
    included), as screen --keep leaves them out and report --step0 counts them.

    \b
    Example:
      benchcheck audit --results out/results --items out/items --out out/audit
      benchcheck audit --results out/results --items out/items --out out/audit --target-fdr 0.1
    """
    from pathlib import Path

    from benchcheck.audit import count_step0, run_audit
    from benchcheck.audit.null import expected_removals, verdict
    from benchcheck.audit.write import headline, stale_probe_note, unaudited_line, write_audit
    from benchcheck.items import fingerprints
    from benchcheck.screen.steps import parse_chain
    from benchcheck.step0.probe_stamp import left_out
    from benchcheck.step0.scope import not_deduplicated_note

    try:
        steps = parse_chain(chain)
    except ValueError as e:
        die(str(e))
    need_step_results(results)
    if compare is not None:
        need_step_results(compare, "--compare")
    loaded = load_items_reporting(item_paths, columns, quiet=quiet)
    dups = scope = None
    if (outcome := step0_option(step0)) is not None:
        dups, scope = outcome.removed(loaded.items), outcome.deduplicated(loaded.items)
    # the chain never saw step 0's duplicates: no null, rate or confidence of the audit counts them
    mc = [it for it in loaded.items if it.format == "mc" and it.item_id not in (dups or ())]
    ids = [it.item_id for it in mc]
    if not ids:
        die("no valid multiple-choice items to audit" + (" that step 0 kept" if dups else ""))
    try:
        # The items' own benchmarks: another benchmark screened into the same folder may use the same ids.
        res = run_audit(results, ids, compare, rounds=rounds, seed=seed, chain=steps, fdr_level=fdr_level,
                        target_fdr=target_fdr, benches={it.bench for it in mc}, current=fingerprints(mc))
    except ValueError as e:
        die(str(e))
    if not res.steps:
        die(f"{results}: no ok rows with letter log-probs for the items given")
    count_step0(res, loaded.items, dups, scope)
    if with_probe:
        from benchcheck.cli.probe import run_default_probe

        run_default_probe(loaded.items, results, seed, dups, step0, scope)
    # the probe's section only where it left out what this audit left out at step 0
    left = left_out(loaded.items, dups)
    paths = write_audit(res, Path(out), Path(results) / "probe", left)
    stale = stale_probe_note(Path(results) / "probe", left)
    for r in res.nulls:
        # The verdict and the headline read the conditioned null; the permutation null is shown
        # beside it, named, because it overstates chance at a step that screens survivors.
        click.echo(f"{r.bench} step {r.step}: removed {r.observed}/{r.n} ({r.observed_rate:.1%}), null "
                   f"{r.cond_mean:.1%} [{r.cond_lo:.1%}, {r.cond_hi:.1%}] (permutation null {r.null_mean:.1%}): "
                   f"{verdict(r)}")
    explained = sum(int(str(e["prior_explained"])) for e in res.prior_effects)
    removed = sum(int(str(e["removed"])) for e in res.prior_effects)
    chance, _, _ = expected_removals(res.nulls)
    exact_rows = sum(int(str(f["with_exact"])) for f in res.floor)
    differ = sum(int(str(f["decisions_differ"])) for f in res.floor)
    click.echo(f"REMOVED={removed} " + ("" if res.step0_removed is None else f"STEP0_REMOVED={res.step0_removed} ")
               + f"NULL_EXPECTED={chance:.1f} PRIOR_EXPLAINED={explained} "
               f"FLOOR_DEPENDENT={differ} ROWS_WITH_LP_EXACT={exact_rows}")
    called = sum(r.called for r in res.nulls)
    click.echo(f"CELLS={len(res.nulls)} EXCESS_CALLED={called} FDR_LEVEL={fdr_level:g}")
    click.echo(headline(res))
    if res.unaudited:
        line = unaudited_line(res.unaudited)
        click.echo(f"note: {line[0].lower()}{line[1:]}", err=True)
    if res.not_deduplicated:
        note = not_deduplicated_note(res.not_deduplicated)
        click.echo(f"note: {note[0].lower()}{note[1:]}", err=True)
    if stale is not None:
        click.echo(f"note: {stale[0].lower()}{stale[1:]}", err=True)
    for t in res.fdr_targets:
        if t.bench == "*":
            click.echo(t.sentence())
    for p in paths:
        click.echo(str(p))


COMMANDS = [audit]
