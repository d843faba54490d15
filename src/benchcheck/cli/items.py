"""``benchcheck items validate|stats``."""

from __future__ import annotations

import sys

import click

from benchcheck.cli.common import load_items_reporting


@click.group("items")
def items() -> None:
    """Validate and describe item files (JSONL, Parquet, CSV)."""


@items.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--columns", default=None,
              help="Column map, e.g. 'item_id=video+qid,options=a0|a1|a2|a3|a4' (A+B joins columns: {A}_{B}).")
def validate(paths: tuple[str, ...], columns: str | None) -> None:
    """Check items; print per-benchmark counts and one line per bad item. Exit 1 if any is bad.

    \b
    Example:
      benchcheck items validate items/*.jsonl items/nextqa.csv
    """
    from benchcheck.items.report import validation_table

    result = load_items_reporting(paths, columns, summary=False)  # the table starts with the summary lines
    click.echo(validation_table(result))
    sys.exit(1 if result.errors else 0)


@items.command("stats")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--columns", default=None,
              help="Column map, e.g. 'item_id=video+qid,options=a0|a1|a2|a3|a4' (A+B joins columns: {A}_{B}).")
def stats(paths: tuple[str, ...], columns: str | None) -> None:
    """Items, options per item and the answer-position histogram per benchmark.

    \b
    Example:
      benchcheck items stats items/
    """
    from benchcheck.items.report import stats_table

    result = load_items_reporting(paths, columns, quiet=True)
    click.echo(stats_table(result.items))


COMMANDS = [items]
