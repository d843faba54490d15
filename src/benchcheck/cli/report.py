"""``benchcheck report``: the static audit site a person reads."""

from __future__ import annotations

import os
from pathlib import Path

import click

from benchcheck.cli.common import (
    CliPath,
    checked_store,
    die,
    load_items_reporting,
    need_frames,
    need_step_results,
    say_left_out,
)
from benchcheck.cli.videos import resolve_reporting, videos_option

# One per core, at most 4: the value docs/report.md states, whatever machine renders this help.
DEFAULT_WORKERS = "one per core, at most 4"


def default_workers() -> int:
    return min(4, os.cpu_count() or 1)


@click.command("report")
@click.option("--results", type=CliPath(exists=True, file_okay=False), required=True, help="Screening results.")
@click.option("--items", "item_paths", multiple=True, type=CliPath(exists=True),
              help="Item files or folders (for question text); without them ids and golds come from the rows.")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True, help="The steps run, in order.")
@click.option("--sweep", type=CliPath(exists=True, file_okay=False), default=None,
              help="Sweep folder (reads results/conditions_results.csv).")
@click.option("--qa", "qa_dir", type=CliPath(exists=True, file_okay=False), default=None,
              help="Output folder of `benchcheck qa run`.")
@click.option("--audit", "audit_dir", type=CliPath(exists=True, file_okay=False), default=None,
              help="Output folder of `benchcheck audit` (its tables, and per-item confidence in the browser).")
@click.option("--side-audit", "side_audits", multiple=True, type=CliPath(exists=True, file_okay=False),
              help="Audit folders of other runs on the same items, shown after the main one (repeatable).")
@click.option("--step0", "step0", type=CliPath(exists=True), default=None,
              help="Step-0 output folder of `benchcheck dedup` (or the kept list given to --keep): duplicates "
                   "shown removed at step 0.")
@click.option("--frames", "frames_root", type=CliPath(exists=True, file_okay=False), default=None,
              help="Frame cache (pool_frames).")
@click.option("--store", type=CliPath(), callback=checked_store, default=None,
              help="Normalized store: names the items' videos for the thumbnails (with --videos).")
@videos_option
@click.option("--copy-frames", is_flag=True, help="Copy the shown frames small into the report instead of linking.")
@click.option("--no-plots", is_flag=True, help="Skip the figures (fastest).")
@click.option("--bench-png", is_flag=True, help="Also a matplotlib PNG per benchmark (slow on big pools).")
@click.option("--out", type=CliPath(file_okay=False), required=True, help="Report folder (open its index.html).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, show_default=DEFAULT_WORKERS,
              help="Processes (benchmarks are built in parallel).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def report(results: str, item_paths: tuple[str, ...], columns: str | None, chain: str, sweep: str | None,
           qa_dir: str | None, audit_dir: str | None, side_audits: tuple[str, ...], step0: str | None,
           frames_root: str | None, store: str | None, videos_dir: str | None,
           copy_frames: bool, no_plots: bool,
           bench_png: bool, out: str, workers: int | None, no_progress: bool) -> None:
    """Write a self-contained static report (works from file://, offline) and print its index.html.

    \b
    Example:
      benchcheck report --results results --items items/ --out results/report
      benchcheck report --results demo_out/results --items demo_out/items --audit demo_out/audit \\
          --side-audit demo_out/audit_prior --out /tmp/report
    """
    from benchcheck.report import ReportOptions, build_report
    from benchcheck.report.site import ReportError
    from benchcheck.screen.steps import parse_chain

    need_step_results(results)
    need_frames(frames_root)
    try:
        steps = parse_chain(chain)
    except ValueError as e:
        die(str(e))
    items = None
    if item_paths:
        loaded = load_items_reporting(item_paths, columns, quiet=True)
        say_left_out(loaded, item_paths, "report")
        items = loaded.items
    items = resolve_reporting(items, store, videos_dir, quiet=True) if items else items
    opts = ReportOptions(Path(results), Path(out), items, steps, sweep=Path(sweep) if sweep else None,
                         qa=Path(qa_dir) if qa_dir else None, audit=Path(audit_dir) if audit_dir else None,
                         frames=Path(frames_root) if frames_root else None,
                         copy_frames=copy_frames, plots=not no_plots, progress=not no_progress,
                         workers=workers or default_workers(),
                         bench_png=bench_png, side_audits=tuple(Path(p) for p in side_audits),
                         step0=Path(step0) if step0 else None)
    try:
        built = build_report(opts)
    except ReportError as e:
        die(str(e))
    for w in built.warnings:
        click.echo(f"WARNING: {w}", err=True)
    if built.probe_note is not None:
        click.echo(f"note: {built.probe_note[0].lower()}{built.probe_note[1:]}", err=True)
    click.echo(f"{built.benches} benchmark{'s' * (built.benches != 1)}, {built.items} item{'s' * (built.items != 1)}, "
               f"{built.seconds:.1f} s", err=True)
    click.echo(str(built.index))


COMMANDS = [report]
