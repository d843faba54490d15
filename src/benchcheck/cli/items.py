"""``benchcheck items validate|stats|link|import``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from benchcheck.cli.common import CliPath, checked_store, die, load_items_reporting, say_left_out, say_problems
from benchcheck.cli.videos import videos_option
from benchcheck.items.ids import ID_PREFIXES


@click.group("items")
def items() -> None:
    """Validate, describe and import item files (JSONL, Parquet, CSV; VLMEvalKit, lmms-eval, HF datasets)."""


@items.command("validate")
@click.argument("paths", nargs=-1, required=True, type=CliPath(exists=True))
@click.option("--columns", default=None,
              help="Column map, e.g. 'item_id=video+qid,options=a0|a1|a2|a3|a4' (A+B joins columns: {A}_{B}).")
def validate(paths: tuple[str, ...], columns: str | None) -> None:
    """Check items; print per-benchmark counts and one line per bad item. Exit 1 if any is bad.

    \b
    Example:
      benchcheck items validate items/*.jsonl items/nextqa.csv
    """
    from benchcheck.items.report import bad_share_lines, validation_table

    result = load_items_reporting(paths, columns, need_items=False)  # exit 1 below names the bad ones
    # The per-file summary went to stderr first (before the per-item lines that would bury it): the
    # table does not repeat it.
    said = set(bad_share_lines(result))
    click.echo("\n".join(line for line in validation_table(result).splitlines() if line not in said))
    sys.exit(1 if result.errors else 0)


@items.command("stats")
@click.argument("paths", nargs=-1, required=True, type=CliPath(exists=True))
@click.option("--columns", default=None,
              help="Column map, e.g. 'item_id=video+qid,options=a0|a1|a2|a3|a4' (A+B joins columns: {A}_{B}).")
@click.option("--store", type=CliPath(), callback=checked_store, default=None,
              help="Normalized store: count the items whose video it holds.")
@videos_option
def stats(paths: tuple[str, ...], columns: str | None, store: str | None, videos_dir: str | None) -> None:
    """Items, videos found / not normalized yet / not found (named), options per item and the
    answer-position histogram per benchmark.

    \b
    Example:
      benchcheck items stats items/ --store store --videos raw_videos
    """
    from benchcheck.items.report import stats_table
    from benchcheck.video.resolve import resolve_items

    if videos_dir is not None and not Path(videos_dir).is_dir():
        die(f"--videos {videos_dir}: no such folder")
    result = load_items_reporting(paths, columns, quiet=True)
    say_left_out(result, paths, "counts")
    for p in result.problems:  # a benchmark-level doubt (golds counted from 1) changes what the counts mean
        if p.severity == "warning":
            click.echo(f"warning: {p}", err=True)
    # Without a store nothing is found by content: reading every file would only count files.
    resolved = resolve_items(result.items, store, videos_dir, hash_files=store is not None)
    click.echo(stats_table(result.items, resolved.resolutions))


@items.command("link")
@click.argument("paths", nargs=-1, required=True, type=CliPath(exists=True))
@click.option("--store", required=True, type=CliPath(), callback=checked_store,
              help="The normalized store (made by 'benchcheck videos normalize').")
@videos_option
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--out", required=True, type=CliPath(file_okay=False),
              help="Folder for the linked item files: <bench>.jsonl, each item's video_id filled in.")
def link(paths: tuple[str, ...], store: str, videos_dir: str | None, columns: str | None, out: str) -> None:
    """Write the items with their videos resolved to video_ids (by path under --videos, store key or
    path in the store's index), so later commands need no --videos. Items whose video was not
    found are written as they were and named on stderr. Exit 2 when no item reaches a video.

    \b
    Example:
      benchcheck items link my_items.jsonl --store store --videos my_videos --out items
    """
    from benchcheck.video.link import write_linked
    from benchcheck.video.resolve import report_unresolved, resolve_items

    if videos_dir is not None and not Path(videos_dir).is_dir():
        die(f"--videos {videos_dir}: no such folder")
    result = load_items_reporting(paths, columns)
    if not result.items:
        die("no valid items to link")
    resolved = resolve_items(result.items, store, videos_dir)
    report_unresolved(resolved, lambda line: click.echo(line, err=True), summary=False)
    files = write_linked(resolved.items, Path(out))
    click.echo(resolved.summary())
    for f in files:
        click.echo(str(f))
    if not resolved.count("stored") and any(r.status != "none" for r in resolved.resolutions):
        die(f"no item reaches a video in {store} (above: why)")


# ``items import``: one block, so that edits to the other subcommands merge around it.
@items.command("import")
@click.argument("source", type=CliPath(exists=True))
@click.option("--from", "fmt", type=click.Choice(["vlmevalkit", "lmms-eval", "hf-folder"]), required=True,
              help="vlmevalkit: an MCQ TSV (or a folder of them); lmms-eval: a task YAML, a group YAML or a "
                   "folder of task YAMLs; hf-folder: a datasets folder (save_to_disk or a Hub snapshot) or file.")
@click.option("--columns", "--map", "columns", default=None,
              help="Column map FIELD=COLUMN,... over the format's defaults, e.g. 'question=prompt,"
                   "options=A|B|C|D,answer=label,answer_kind=letter,video=clip' (lmms-eval: also doc_to_text, "
                   "doc_to_choice, doc_to_target, doc_to_visual as columns).")
@click.option("--bench", default=None, help="Benchmark name of every item (default: the file, task or config).")
@click.option("--id-prefix", "id_prefix", type=click.Choice(ID_PREFIXES), default=None,
              help="Write each id as BENCH/ID (bench: the item's benchmark), so benchmarks that number their "
                   "items alike (0..N) load and screen together.")
@click.option("--split", default=None, help="Split to read (default: the task's test split, else 'test', else "
                                            "the only one).")
@click.option("--out", required=True, type=CliPath(file_okay=False, path_type=Path),
              help="Folder for the item files: one <bench>.jsonl per benchmark.")
@click.option("--force", is_flag=True, help="Replace item files that exist in --out.")
def import_cmd(source: str, fmt: str, columns: str | None, bench: str | None, id_prefix: str | None,
               split: str | None, out: Path, force: bool) -> None:
    """Import a benchmark from VLMEvalKit, lmms-eval or a Hugging Face datasets folder as item files.

    One line per record that cannot become an item (file, record, why); the others are written.
    Exit 0 when items were written, 2 when none could be (the reason printed). Importing an
    lmms-eval task runs its utils.py, as lmms-eval does.

    \b
    Example:
      benchcheck items import export/MyBench_kept.tsv --from vlmevalkit --out items/
      benchcheck items import items_raw/B.jsonl --from hf-folder --id-prefix bench --out items/
    """
    from benchcheck.cli.common import die
    from benchcheck.items.importers import SourceError, import_items, write_items

    try:
        result = import_items(fmt, Path(source), columns, bench, split, id_prefix)
    except SourceError as e:
        die(str(e))
        return
    except ValueError as e:  # a column map that cannot be read
        raise click.BadParameter(str(e), param_hint="--columns") from e
    say_problems(result)  # what validate says of the same records, in the same words
    if not result.items:
        die(f"no item could be imported from {source} ({len(result.errors)} records refused)")
    try:
        paths = write_items(result.items, out, force)
    except SourceError as e:
        die(str(e))
        return
    n_bench = len({i.bench for i in result.items})
    n = len(result.items)
    click.echo(f"{n} item{'s' * (n != 1)} of {n_bench} benchmark{'s' * (n_bench != 1)} imported, "
               f"{len(result.errors)} refused", err=True)
    for path in paths:
        click.echo(str(path))


COMMANDS = [items]
