"""``benchcheck items validate|stats|import``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from benchcheck.cli.common import load_items_reporting


@click.group("items")
def items() -> None:
    """Validate, describe and import item files (JSONL, Parquet, CSV; VLMEvalKit, lmms-eval, HF datasets)."""


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
    from benchcheck.items.report import bad_share_lines, validation_table

    result = load_items_reporting(paths, columns)
    # The per-file summary went to stderr first (before the per-item lines that would bury it): the
    # table does not repeat it.
    said = set(bad_share_lines(result))
    click.echo("\n".join(line for line in validation_table(result).splitlines() if line not in said))
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


# ``items import``: one block, so that edits to the other subcommands merge around it.
@items.command("import")
@click.argument("source", type=click.Path(exists=True))
@click.option("--from", "fmt", type=click.Choice(["vlmevalkit", "lmms-eval", "hf-folder"]), required=True,
              help="vlmevalkit: an MCQ TSV (or a folder of them); lmms-eval: a task YAML, a group YAML or a "
                   "folder of task YAMLs; hf-folder: a datasets folder (save_to_disk or a Hub snapshot) or file.")
@click.option("--columns", "--map", "columns", default=None,
              help="Column map FIELD=COLUMN,... over the format's defaults, e.g. 'question=prompt,"
                   "options=A|B|C|D,answer=label,answer_kind=letter,video=clip' (lmms-eval: also doc_to_text, "
                   "doc_to_choice, doc_to_target, doc_to_visual as columns).")
@click.option("--bench", default=None, help="Benchmark name of every item (default: the file, task or config).")
@click.option("--split", default=None, help="Split to read (default: the task's test split, else 'test', else "
                                            "the only one).")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the item files: one <bench>.jsonl per benchmark.")
@click.option("--force", is_flag=True, help="Replace item files that exist in --out.")
def import_cmd(source: str, fmt: str, columns: str | None, bench: str | None, split: str | None, out: Path,
               force: bool) -> None:
    """Import a benchmark from VLMEvalKit, lmms-eval or a Hugging Face datasets folder as item files.

    One line per record that cannot become an item (file, record, why); the others are written.
    Exit 0 when items were written, 2 when none could be (the reason printed). Importing an
    lmms-eval task runs its utils.py, as lmms-eval does.

    \b
    Example:
      benchcheck items import export/MyBench_kept.tsv --from vlmevalkit --out items/
    """
    from benchcheck.cli.common import die
    from benchcheck.items.importers import SourceError, import_items, write_items

    try:
        result = import_items(fmt, Path(source), columns, bench, split)
    except SourceError as e:
        die(str(e))
        return
    except ValueError as e:  # a column map that cannot be read
        raise click.BadParameter(str(e), param_hint="--columns") from e
    for p in result.problems:
        click.echo(f"{'bad item' if p.severity == 'error' else 'note'}: {p}", err=True)
    if not result.items:
        die(f"no item could be imported from {source} ({len(result.errors)} records refused)")
    try:
        paths = write_items(result.items, out, force)
    except SourceError as e:
        die(str(e))
        return
    n_bench = len({i.bench for i in result.items})
    click.echo(f"{len(result.items)} items of {n_bench} benchmarks imported, {len(result.errors)} refused", err=True)
    for path in paths:
        click.echo(str(path))


COMMANDS = [items]
