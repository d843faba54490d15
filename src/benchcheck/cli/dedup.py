"""``benchcheck dedup``: step 0, exact and near-duplicate items across a pool of benchmarks."""

from __future__ import annotations

import click

from benchcheck.cli.common import CliPath, FiniteFloatRange, die, load_items_reporting
from benchcheck.defaults import DEDUP_MODEL, DEDUP_REVISION


@click.command("dedup")
@click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
              help="Item files or folders (repeatable). Their order ranks the benchmarks: a duplicate "
                   "set keeps the item of the benchmark listed first.")
@click.option("--out", type=CliPath(file_okay=False), required=True,
              help="Output folder (step0_kept.parquet, step0_removed.jsonl, screen_counts_full.csv, "
                   "step0_summary.md).")
@click.option("--model", default=DEDUP_MODEL, show_default=True,
              help="Sentence-transformers model: a hub id, a local folder, or 'minilm' (packaged, offline).")
@click.option("--revision", default=None,
              help=f"Hub revision; the default model is pinned to {DEDUP_REVISION}.")
@click.option("--threshold", type=FiniteFloatRange(-1.0, 1.0), default=None,
              help="Cosine similarity at or above which two texts are near duplicates "
                   "[default: 0.96 for bge-large-en-v1.5, 0.95 for minilm and other models].")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True,
              help="Texts per encoder batch.")
@click.option("--cache", "cache_dir", type=CliPath(file_okay=False), default=None,
              help="Embedding cache folder [default: OUT/pool_embeddings].")
@click.option("--device", default="auto", show_default=True, help="auto (CUDA when present), cpu, cuda, cuda:1, ...")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--quiet", is_flag=True, help="No progress bar and no per-item problem lines.")
def dedup(item_paths: tuple[str, ...], out: str, model: str, revision: str | None, threshold: float | None,
          batch_size: int, cache_dir: str | None, device: str, columns: str | None, quiet: bool) -> None:
    """Step 0: find exact and near-duplicate items within and across benchmarks.

    Exact: the same item text (question with whitespace collapsed, then the options). Near: cosine
    similarity of sentence embeddings at or above the threshold, and the same guard words
    (before/after, first/last, numbers, not, ...). Both only between items of the same video, or
    of one benchmark when neither has a video. A duplicate whose gold differs from the kept
    item's (by index for an exact one, by the gold option's text for a near one, whose options may
    be reordered) is a gold conflict: removed as a copy, counted apart, and named in a warning.
    Prints the totals and the output files.

    \b
    Example:
      benchcheck dedup --items items/ --out results/step0 --model minilm
    """
    from pathlib import Path

    from benchcheck.dedup import DedupError, SentenceEmbedder, dedup_items, default_threshold, resolve_model
    from benchcheck.dedup.outputs import conflict_warning, unchecked_warning, write_outputs

    loaded = load_items_reporting(item_paths, columns, quiet=quiet)
    if not loaded.items:
        die("no valid items to deduplicate")
    try:
        ref = resolve_model(model, revision)
        embedder = SentenceEmbedder(ref, device=device, batch_size=batch_size)
        cut = default_threshold(ref) if threshold is None else threshold
        result = dedup_items(loaded.items, embedder, cut, cache_dir or Path(out) / "pool_embeddings",
                             progress=not quiet)
        paths = write_outputs(result, out)
    except (DedupError, OSError) as e:
        die(str(e))
    verdicts = [v.verdict for v in result.verdicts]
    s = result.stats
    click.echo(f"ITEMS={len(verdicts)} KEPT={verdicts.count('kept')} EXACT={verdicts.count('exact')} "
               f"NEAR={verdicts.count('near')} CROSS={sum(v.kind == 'cross' for v in result.verdicts)} "
               f"INVALID_ITEMS={len(loaded.errors)} GOLD_CONFLICTS={verdicts.count('gold_conflict')}")
    # printed even with --quiet: one line each for the run, and a label error is no progress note
    for warning in (conflict_warning(result.verdicts), unchecked_warning(result.verdicts)):
        if warning:
            click.echo(f"warning: {warning}", err=True)
    click.echo(f"model={result.model} threshold={result.threshold:g} device={embedder.device} "
               f"encoded={s.encoded} reused={s.reused} embed_s={s.embed_s:.1f} compare_s={s.compare_s:.1f}")
    for p in paths:
        click.echo(str(p))


COMMANDS = [dedup]
