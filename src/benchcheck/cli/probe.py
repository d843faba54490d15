"""``benchcheck probe``: a k-fold text-only probe per benchmark and label-error flags."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

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
from benchcheck.items import Item

if TYPE_CHECKING:
    from benchcheck.probe.run import ProbeResult


@click.command("probe")
@click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
              help="Item files or folders (repeatable).")
@click.option("--out", type=CliPath(file_okay=False), default=None,
              help="Output folder: probe_items.parquet, probe_benchmarks.csv, probe_ibp.csv, label_flags.csv, "
                   "probe.md [default: RESULTS/probe, where assemble, audit and report read them].")
@click.option("--results", type=CliPath(file_okay=False), default=None,
              help="Screening results folder: step 1 gives the blind gain, steps 3, 5, 6 the label flags.")
@click.option("--step0", "step0", type=CliPath(exists=True), default=None,
              help="Step-0 output folder of `benchcheck dedup` (or the kept list given to screen --keep): its "
                   "duplicates are removed at step 0, neither probed nor flagged, and counted apart per benchmark.")
@click.option("--model", default="minilm", show_default=True,
              help="Sentence embeddings: 'minilm' (packaged, offline), a local sentence-transformers folder, a hub id, "
                   "or 'none' (hand-built text features only).")
@click.option("--revision", default=None, help="Hub revision of --model.")
@click.option("--cache", "cache_dir", type=CliPath(file_okay=False), default=None,
              help="Content-addressed embedding cache [default: OUT/probe_embeddings].")
@click.option("--device", default="cpu", show_default=True, help="Encoder device: cpu, auto, cuda, cuda:1, ...")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True,
              help="Texts per encoder batch.")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True,
              help="Folds (grouped by video: one video's items are always in one fold).")
@click.option("--permutations", type=click.IntRange(min=0), default=99, show_default=True,
              help="Rounds of each permutation null (the whole k-fold probe refitted per round); 0: none.")
@click.option("--no-positions-null", is_flag=True,
              help="Skip the second null (golds permuted among items, positions kept): halves the time.")
@click.option("--min-items", type=click.IntRange(min=4), default=20, show_default=True,
              help="A benchmark with fewer items is skipped (and said so).")
@click.option("--no-ibp", is_flag=True, help="Skip Iterative Bias Pruning.")
@click.option("--flag-margin", type=FiniteFloatRange(min=0.0), default=None,
              help="Margin (nats) a source's pick needs to count for a label flag [default: 1.0].")
@click.option("--flag-agree", type=click.IntRange(min=1), default=2, show_default=True,
              help="Sources that must agree on one non-gold option to flag an item.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the folds, the projection and the nulls.")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--quiet", is_flag=True, help="No per-item problem lines.")
def probe(item_paths: tuple[str, ...], out: str | None, results: str | None, step0: str | None, model: str,
          revision: str | None, cache_dir: str | None, device: str, batch_size: int, folds: int, permutations: int,
          no_positions_null: bool, min_items: int, no_ibp: bool, flag_margin: float | None, flag_agree: int,
          seed: int, columns: str | None, quiet: bool) -> None:
    """Learn each benchmark's gold from its text alone (k folds by video) and flag likely label errors.

    Per benchmark: out-of-fold accuracy of a logistic regression on option features (sentence
    embeddings, length, word overlap with the question, position) against chance, with permutation
    p-values; the blind gain over the zero-shot step-1 model (--results); Iterative Bias Pruning
    (how many items remain when the most predictable are removed until the probe is at chance).
    Label flags: items where steps 3, 5, 6 and the probe agree on one non-gold option. A learnable
    pattern is evidence of a shortcut, not proof; a flag is a question for a person, never a removal.
    With --step0, only the items step 0 kept are probed and flagged (as screen --keep screens them);
    its duplicates are counted apart, as report --step0 counts them.

    \b
    Example:
      benchcheck probe --items out/items --results out/results
    """
    from pathlib import Path

    from benchcheck.dedup import DedupError
    from benchcheck.probe import FLAG_MARGIN, ProbeConfig, probe_pool
    from benchcheck.probe.embedder import text_embedder
    from benchcheck.probe.flags import no_flags_reason
    from benchcheck.probe.run import MIN_GROUPS, skip_reason, step0_kept

    if results is not None:
        need_step_results(results)
    if out is None and results is None:
        die("give --out, or --results (the probe then writes RESULTS/probe)")
    out = out if out is not None else str(Path(str(results)) / "probe")
    loaded = load_items_reporting(item_paths, columns, quiet=quiet)
    mc = [it for it in loaded.items if it.format == "mc" and len(it.options) >= 2]
    if not mc:
        die("no valid multiple-choice items to probe")
    dups = scope = None
    if (outcome := step0_option(step0)) is not None:
        dups, scope = outcome.removed(loaded.items), outcome.deduplicated(loaded.items)
    cfg = ProbeConfig(folds=folds, permutations=permutations, shuffle_null=not no_positions_null, seed=seed,
                      min_items=min_items, ibp=not no_ibp)
    by_bench: dict[str, list[Item]] = {}
    for it in mc:
        by_bench.setdefault(it.bench, []).append(it)
    reasons = {b: skip_reason(step0_kept(its, dups or ()), cfg) for b, its in by_bench.items()}
    if all(r is not None for r in reasons.values()):
        die(f"no benchmark has at least {min_items} items on {MIN_GROUPS}+ videos: "
            + "; ".join(f"{b}: {r}" for b, r in reasons.items()))
    try:
        emb = text_embedder(model, cache_dir or Path(out) / "probe_embeddings", revision, device, batch_size)
        run = probe_pool(mc, out, cfg, emb, results, FLAG_MARGIN if flag_margin is None else flag_margin, flag_agree,
                         echo=click.echo, step0=dups, step0_source=step0, step0_scope=scope)
    except (DedupError, OSError) as e:
        die(str(e))
    res = run.result
    learn = sum(b.learnable for b in res.probed)
    click.echo(f"BENCHMARKS={len(res.probed)} LEARNABLE={learn} SKIPPED={len(res.benches) - len(res.probed)} "
               f"ITEMS={len(res.items)} "
               + ("" if dups is None else f"STEP0_REMOVED={sum(b.step0_removed or 0 for b in res.benches)} ")
               + f"FLAGGED={'n/a' if run.flags is None else len(run.flags)} "
               f"ENCODED={res.embed.encoded} REUSED={res.embed.reused}")
    if run.flags is None:
        click.echo(no_flags_reason(run.flag_sources, flag_agree))
    step0_note(res)
    if any(not b.tested for b in res.probed):
        from benchcheck.probe.run import SIGNIFICANCE, rounds_needed

        click.echo(f"note: --permutations {permutations} cannot call a benchmark learnable (the smallest p-value "
                   f"is 1/(1 + rounds); p <= {SIGNIFICANCE} needs {rounds_needed()} or more): LEARNABLE counts "
                   "none, and probe.md says 'not tested'", err=True)
    for p in run.paths:
        click.echo(str(p))


def step0_note(res: ProbeResult) -> None:
    """The ``note:`` line naming the benchmarks step 0's dedup run never read (probe.md's sentence)."""
    from benchcheck.probe.outputs import PROBED_WHOLE, not_deduplicated
    from benchcheck.step0.scope import not_deduplicated_note

    if unread := not_deduplicated(res):
        note = not_deduplicated_note(unread, PROBED_WHOLE)
        click.echo(f"note: {note[0].lower()}{note[1:]}", err=True)


def run_default_probe(items: Sequence[Item], results: str, seed: int = 0, step0: Collection[str] | None = None,
                      step0_source: str | None = None, step0_scope: Collection[str] | None = None) -> None:
    """``benchcheck audit --probe``: the probe with its defaults into RESULTS/probe; a one-line
    note (not an error) when no benchmark is large enough or the model cannot load. ``step0``: the
    ids step 0 removed (``audit --step0``, read from ``step0_source``), neither probed nor flagged,
    as ``probe --step0``; a benchmark outside ``step0_scope`` (those its dedup run read) is probed
    whole and said to be not deduplicated."""
    from pathlib import Path

    from benchcheck.dedup import DedupError
    from benchcheck.probe import ProbeConfig, probe_pool
    from benchcheck.probe.embedder import text_embedder

    cfg = ProbeConfig(seed=seed)
    out = Path(results) / "probe"
    try:
        emb = text_embedder("minilm", out / "probe_embeddings")
        run = probe_pool(items, out, cfg, emb, results, step0=step0, step0_source=step0_source,
                         step0_scope=step0_scope)
    except (DedupError, OSError, ImportError) as e:
        click.echo(f"probe skipped: {e}", err=True)
        return
    n = len(run.result.probed)
    click.echo(f"probe: {n} benchmark{'s' * (n != 1)} probed, "
               f"{sum(b.learnable for b in run.result.probed)} learnable from text, "
               f"{'no' if run.flags is None else len(run.flags)} label flags"
               + ("" if step0 is None else f", {sum(b.step0_removed or 0 for b in run.result.benches)} removed at "
                  "step 0 left out") + f" ({out})")
    step0_note(run.result)


COMMANDS = [probe]
