"""``benchcheck assemble``: the screened pool, its summaries and accounting."""

from __future__ import annotations

import click

from benchcheck.cli.common import CliPath, die, load_items_reporting, need_step_results


@click.command("assemble")
@click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
              help="Item files or folders (repeatable).")
@click.option("--results", type=CliPath(exists=True, file_okay=False), required=True,
              help="Screening results folder.")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True, help="The steps run, in order.")
@click.option("--frames", "frames_root", type=CliPath(), default=None, help="Frame cache (for not-screened).")
@click.option("--store", type=CliPath(), default=None, help="Normalized store (for not-screened).")
@click.option("--keep", "keep_file", type=CliPath(exists=True), default=None,
              help="Step-0 kept list (step 0's Parquet, a JSONL of item_id rows, or one id a line): only these items.")
@click.option("--columns", default=None,
              help="Column map for CSV/Parquet items, e.g. 'item_id=qid,options=a0|a1|a2|a3|a4'.")
def assemble(item_paths: tuple[str, ...], results: str, chain: str, frames_root: str | None, store: str | None,
             keep_file: str | None, columns: str | None) -> None:
    """Write pool_items.parquet, pool.duckdb, pool_summary.md/.csv and run_accounting.csv; print flags.

    \b
    Example:
      benchcheck assemble --items items/ --results results --frames frames/pool_frames
    """
    from benchcheck.screen.assemble import assemble as run
    from benchcheck.screen.context import make_context
    from benchcheck.screen.job import frame_source
    from benchcheck.screen.steps import parse_chain

    need_step_results(results)
    try:
        steps = parse_chain(chain)
        frames = frame_source(frames_root, store)
    except ValueError as e:
        die(str(e))
    loaded = load_items_reporting(item_paths, columns, quiet=True)
    try:
        ctx = make_context(loaded.items, results, steps, frames, keep_file)
    except ValueError as e:  # a kept list that cannot be read
        die(str(e))
    out = run(ctx)
    for name, path in out.paths.items():
        click.echo(f"{name}: {path}")
    for flag in out.flags:
        click.echo(f"FLAG: {flag}")
    if out.probe_note is not None:
        click.echo(f"note: {out.probe_note[0].lower()}{out.probe_note[1:]}", err=True)


COMMANDS = [assemble]
