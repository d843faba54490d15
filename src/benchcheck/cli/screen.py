"""``benchcheck screen``: plan or run one screening step."""

from __future__ import annotations

import click

from benchcheck.cli.common import die, load_items_reporting


@click.command("screen")
@click.option("--items", "item_paths", multiple=True, required=True, type=click.Path(exists=True),
              help="Item files or folders (repeatable).")
@click.option("--step", type=int, required=True, help="Step number (1-6).")
@click.option("--results", type=click.Path(), required=True, help="Results folder (step<k>/ inside).")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True, help="Order of the steps.")
@click.option("--frames", "frames_root", type=click.Path(), default=None, help="Frame cache (pool_frames).")
@click.option("--keep", "keep_file", type=click.Path(exists=True), default=None, help="Step-0 kept list.")
@click.option("--bench", default=None, help="Only these benchmarks: A,B.")
@click.option("--limit", type=int, default=None, help="At most N items per benchmark.")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--plan-only", is_flag=True, help="Print REMAINING_TOTAL=<n> and the other counts; run nothing.")
def screen(item_paths: tuple[str, ...], step: int, results: str, chain: str, frames_root: str | None,
           keep_file: str | None, bench: str | None, limit: int | None, columns: str | None,
           plan_only: bool) -> None:
    """Screen items at one step; rows go to RESULTS/step<k>/<bench>.jsonl.

    \b
    Example:
      benchcheck screen --items items/ --step 1 --results results --plan-only
    """
    from benchcheck.screen.context import make_context
    from benchcheck.screen.steps import parse_chain

    try:
        steps = parse_chain(chain)
    except ValueError as e:
        die(str(e))
    if step not in steps:
        die(f"step {step} is not in the chain {chain}")
    loaded = load_items_reporting(item_paths, columns, quiet=plan_only)
    ctx = make_context(loaded.items, results, steps, frames_root, keep_file,
                       bench.split(",") if bench else None, limit)
    plan = ctx.plan(step)
    if plan_only:
        for line in plan.lines(invalid=len(loaded.errors)):
            click.echo(line)
        return
    die("running a step needs an engine; use --plan-only (engines arrive with the screening runner)")


COMMANDS = [screen]
