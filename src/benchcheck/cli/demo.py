"""``benchcheck demo items|run``: the embedded demo."""

from __future__ import annotations

import click


@click.group("demo")
def demo() -> None:
    """The embedded demo: synthetic benchmarks (and the main job run on them)."""


@demo.command("items")
@click.option("--out", type=click.Path(), required=True, help="Folder for the demo item files.")
@click.option("--seed", type=int, default=0, show_default=True)
def items(out: str, seed: int) -> None:
    """Write three small synthetic benchmarks (JSONL, CSV, Parquet) with planted bad items.

    \b
    Example:
      benchcheck demo items --out demo_out/items
    """
    from benchcheck.demo.items import write_demo_items

    pool = write_demo_items(out, seed=seed)
    for p in pool.paths:
        click.echo(str(p))


@demo.command("run")
@click.option("--out", type=click.Path(), default="demo_out", show_default=True)
def run(out: str) -> None:
    """Run the main job on the embedded demo and print where the outputs are.

    \b
    Example:
      benchcheck demo run --out demo_out
    """
    from benchcheck.demo.run import run_demo

    run_demo(out, echo=click.echo)


COMMANDS = [demo]
