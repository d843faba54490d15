"""``benchcheck demo items|run``: the embedded demo."""

from __future__ import annotations

import click

from benchcheck.cli.common import SEED, CliPath


@click.group("demo")
def demo() -> None:
    """The embedded demo: synthetic benchmarks (and the main job run on them)."""


@demo.command("items")
@click.option("--out", type=CliPath(file_okay=False), required=True, help="Folder for the demo item files.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--videos", is_flag=True,
              help="Instead: the known-kind video benchmarks (clips, store, frame cache, items, ground truth).")
def items(out: str, seed: int, videos: bool) -> None:
    """Write three small synthetic benchmarks (JSONL, CSV, Parquet) with planted bad items, or with
    --videos the demo's video benchmarks whose item kinds are known (site page "The demo").

    \b
    Example:
      benchcheck demo items --out demo_out/items
      benchcheck demo items --videos --out demo_out
    """
    if videos:
        from benchcheck.demo.run import prepare_benchmarks

        bundle = prepare_benchmarks(out)
        for p in bundle.paths:
            click.echo(str(p))
        click.echo(f"frames: {bundle.frames}")
        click.echo(f"ground truth: {bundle.truth}")
        return
    from benchcheck.demo.items import write_demo_items

    pool = write_demo_items(out, seed=seed)
    for p in pool.paths:
        click.echo(str(p))


@demo.command("run")
@click.option("--out", type=CliPath(file_okay=False), default="demo_out", show_default=True)
@click.option("--chain", default="1,2,3,4,5,6", show_default=True,
              help='Screening chain; the predicted funnel follows it (site page "The demo").')
@click.option("--qa/--no-qa", default=True, show_default=True, help="Run the QA benchmark part (two local servers).")
@click.option("--sweep/--no-sweep", "sweep", default=True, show_default=True,
              help="Run the frames x pixels sweep on the benchmarks (reference engine) and its verdicts.")
def run(out: str, chain: str, qa: bool, sweep: bool) -> None:
    """Run the pipeline on the known-kind benchmarks with the reference engine; print the funnel
    per kind next to the predicted one, the sweep verdicts next to the expected ones, the audit's
    checks against the ground truth, and where the outputs are. Exit 1 when one differs.

    \b
    Example:
      benchcheck demo run --out demo_out
      benchcheck demo run --out demo_chain5 --chain 5 --no-qa
    """
    from benchcheck.cli.common import die
    from benchcheck.demo.run import run_demo
    from benchcheck.screen.steps import parse_chain

    try:
        steps = parse_chain(chain)
    except ValueError as e:
        die(str(e))
    result = run_demo(out, echo=click.echo, chain=steps, qa=qa, sweep_on=sweep)
    failed = [what for what, ok in (("funnel", result.funnel_match), ("sweep verdicts", result.sweep_match),
                                     ("audit ground-truth checks", result.audit_match), ("QA run", result.qa_ok),
                                     ("probe and label flags", result.probe_match))
              if ok is False]
    if failed:
        click.echo(f"demo: {', '.join(failed)} did not come out as constructed (see above)", err=True)
        raise SystemExit(1)


COMMANDS = [demo]
