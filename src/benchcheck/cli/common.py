"""Options and helpers shared by several commands."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click

from benchcheck.items import ColumnMap, LoadResult, load_items

if TYPE_CHECKING:
    from benchcheck.report.source import Step0

F = TypeVar("F", bound=Callable[..., Any])

# numpy's generators take seeds >= 0 and scikit-learn's random_state at most 2**32 - 1: a seed
# outside both ended a command with a traceback deep inside the fit.
SEED = click.IntRange(0, 2**32 - 1)


class CliPath(click.Path):
    """Every path option and argument of the CLI: ``click.Path`` that also refuses an empty value.
    ``--out "$OUTDIR"`` with the variable unset passes ``""``, which every ``Path`` and ``open``
    read as the current folder: a command then wrote its outputs there, or read it, and exit 0."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str | bytes) and not value:
            self.fail("'' is an empty path (an unset shell variable?); name the folder or file, '.' for this one",
                      param, ctx)
        return super().convert(value, param, ctx)


class FiniteFloatRange(click.FloatRange):
    """A float range that also refuses nan and infinities: click's range lets nan through (every
    comparison with it is false), and a nan cut makes every test fail without a word."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{rv} is not a finite number", param, ctx)
        return rv


def load_items_reporting(paths: Sequence[str], columns: str | None, quiet: bool = False,
                         need_items: bool = True) -> LoadResult:
    """Load items, printing one line per problem to stderr; a bad file or item never stops a run.
    ``quiet``: no per-item lines, but each file's summary (a file whose bad share is high, its
    commonest cause and the fix it names) still. With ``need_items``, no item in any file ends the
    command (exit 2) with each file's reason."""
    try:
        cmap = ColumnMap.parse(columns) if columns else None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--columns") from e
    result = load_items(paths, cmap)
    say_problems(result, quiet)
    if need_items and paths and not result.items:
        from benchcheck.items.report import no_items_reason

        die(no_items_reason(result, paths))
    return result


def say_problems(result: LoadResult, quiet: bool = False) -> None:
    """A load's findings on stderr, as every command that reads items (and ``items import``) says
    them: each file's bad-share warning, then its file-level lines and summary notes, then one line
    per record (``quiet``: the warnings only)."""
    from benchcheck.items.report import bad_share_lines

    # A file's summary and hints come first: thousands of per-item lines would bury them. --quiet
    # keeps it: a benchmark whose every id another one took would vanish without a word.
    for line in bad_share_lines(result):
        click.echo(f"warning: {line}", err=True)
    if not quiet:
        for p in [*(p for p in result.problems if p.first), *(p for p in result.problems if not p.first)]:
            click.echo(f"{p.label}: {p}", err=True)


def say_left_out(result: LoadResult, paths: Sequence[str], what: str) -> None:
    """One line for the bad items a quiet load left out: they are in neither the report nor the
    export, and a whole benchmark whose ids another one took would vanish without a word."""
    bad = [p for p in result.problems if p.severity == "error"]
    if bad:
        # a record may have several problems (an empty question and one option): it is one item left out
        records = len({(p.path, p.where) for p in bad})
        click.echo(f"warning: {records} bad items are left out of the {what} (first: {bad[0]}); "
                   f"'benchcheck items validate {' '.join(paths)}' lists them", err=True)


def check_store(value: Any, ctx: click.Context | None = None, param: click.Parameter | None = None) -> Any:
    """``--store`` of a command that reads a normalized store: refused in one line, naming the path,
    unless ``video.meta.store_problem`` finds none; the value as given (None passes)."""
    from benchcheck.video.meta import store_problem

    why = None if value is None else store_problem(value)
    if why:
        raise click.BadParameter(f"{str(value)!r}: {why}", ctx, param, None if param else "'--store'")
    return value


def checked_store(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """``check_store`` as an option's callback."""
    return check_store(value, ctx, param)


def columns_option() -> click.Option:
    return click.Option(
        ["--columns"],
        default=None,
        help="Column map for CSV/Parquet, e.g. 'item_id=qid,options=a0|a1|a2|a3|a4,video_key=video'.",
    )


def executor_options(f: F) -> F:
    """``--executor NAME`` (from ``executors.registry``) and ``--ray-address`` (screen and sweep run:
    site page "Ray")."""
    from benchcheck.executors.registry import choices

    f = click.option("--ray-address", default=None,
                     help="ray: auto or HOST:PORT of a running cluster (default: start a local Ray).")(f)
    return click.option("--executor", type=click.Choice(choices()), default="local", show_default=True,
                        help='Who works the units: this process, or a Ray Data pipeline (site page "Ray").')(f)


def need_step_results(results: str, option: str = "--results") -> None:
    """A screening results folder with no ``step<k>`` folder (an empty folder, a sweep's, a typo of
    one that exists) ends the command in one line: reading it would assemble, export or report
    every item as pending and exit 0, as if the screen had run."""
    from benchcheck.stats.source import steps_in

    if not steps_in(results):
        die(f"{option} {results or repr(results)}: no step<k> folders with results "
            "(a folder written by 'benchcheck screen')")


def need_frames(frames_root: str | None) -> None:
    """``--frames`` that is no frame cache (a store, a folder of videos: ``video.folders``) ends the
    command in one line, as ``screen`` and ``assemble`` refuse it."""
    from benchcheck.video.folders import frames_refusal

    why = None if frames_root is None else frames_refusal(frames_root)
    if why:
        die(why)


def need_engine_reads(engine: str, **given: Any) -> None:
    """An engine-only option (``registry.ENGINE_ONLY``: ``hf_config=``, ``rules=``,
    ``letter_tokenizer=`` as given) with an engine that does not read it ends the command in one
    line, before the items are read."""
    from benchcheck.engines.options import EngineOptions
    from benchcheck.engines.registry import unread_option

    why = unread_option(engine, EngineOptions(**given))
    if why:
        die(why)


def need_key_variable(api_key_env: str | None, executor: str) -> None:
    """``--api-key-env VAR`` naming a variable that is unset or empty ends a local run in one line,
    before any request: the endpoints would get no key, refuse every request with 401, and the run
    would stop on "check the API key" without saying the variable it was told to read holds none.
    A Ray run reads the variable on its engine actors' nodes, not here, so it is not checked."""
    import os

    if api_key_env and executor == "local" and not os.environ.get(api_key_env):
        die(f"--api-key-env {api_key_env}: that variable is not set in this environment (export it, "
            "or leave --api-key-env out for a server without a key)")


def need_own_results(results: str, kind: Literal["screen", "sweep"], option: str = "--results") -> None:
    """A results folder that holds the other command's results ends the command in one line: a
    screen run given a sweep's folder (or the reverse) mixed its rows and run log into it, and
    every later reader of that folder (pack, report, assemble) took it for one kind only. A new or
    empty folder, or one of ``kind``, passes; ``run_log.jsonl`` alone says nothing (both write it)."""
    from benchcheck.stats.source import steps_in
    from benchcheck.sweep.results import CSV_NAME, RAW_DIR, ROWS_DIR

    if kind == "sweep":
        held = [f"step{k}/" for k in steps_in(results)]
        other, hint = "screening results", "the sweep's rows go in a folder of their own, e.g. sweep/results"
    else:
        held = [name + ("/" if (Path(results) / name).is_dir() else "") for name in (CSV_NAME, ROWS_DIR, RAW_DIR)
                if (Path(results) / name).exists()]
        other, hint = "sweep results", "screening rows go in a folder of their own, e.g. results"
    if held:
        die(f"{option} {results}: a {other} folder (holds {', '.join(held)}); {hint}")


def step0_option(step0: str | None) -> Step0 | None:
    """``--step0`` read (report, export, probe, audit): a dedup folder or a kept list; one that
    cannot be read is ``read_step0``'s one line and exit 2, before any work."""
    if step0 is None:
        return None
    from benchcheck.report.source import read_step0

    try:
        return read_step0(Path(step0))
    except ValueError as e:
        die(str(e))


def die(msg: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {msg}", err=True)
    sys.exit(code)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` for a printed line, the noun singular for one: "1 item", "3 items"."""
    return f"{n} {noun}{'s' * (n != 1)}"
