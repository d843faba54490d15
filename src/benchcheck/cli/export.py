"""``benchcheck export``: the cleaned (or removed) items for lmms-eval, VLMEvalKit, HF datasets or Inspect AI."""

from __future__ import annotations

from pathlib import Path

import click

from benchcheck.cli.common import (
    CliPath,
    checked_store,
    counted,
    die,
    load_items_reporting,
    need_step_results,
    say_left_out,
    step0_option,
)


@click.command("export")
@click.option("--results", type=CliPath(exists=True, file_okay=False), required=True,
              help="Screening results folder (the fates come from it).")
@click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
              help="Item files or folders (repeatable): the question, options and video of each item.")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True, help="The steps run, in order.")
@click.option("--format", "fmt", type=click.Choice(["lmms-eval", "vlmevalkit", "parquet", "inspect"]), required=True,
              help="Which harness reads the export.")
@click.option("--removed", is_flag=True, help="Export the removed items instead of the kept ones.")
@click.option("--frames", "frames_root", type=CliPath(exists=True, file_okay=False), default=None,
              help="Frame cache: visual steps count as not screened for items without frames (as assemble); "
                   "without it, an item a visual step has not screened is pending.")
@click.option("--step0", "step0", type=CliPath(exists=True), default=None,
              help="Step-0 output folder of `benchcheck dedup` (or the kept list given to screen --keep): its "
                   "duplicates are removed at step 0 (with --removed, exported with removed_at 0), not pending.")
@click.option("--store", type=CliPath(), callback=checked_store, default=None,
              help="Normalized store: its index names the source file of a store key or a bare video_id.")
@click.option("--video-source", type=click.Choice(["original", "store"]), default="original", show_default=True,
              help="original: the video each item came with (its path or URL); store: the normalized re-encode "
                   "the screening saw (needs --store).")
@click.option("--drop-unscreened", is_flag=True,
              help="Leave out the kept items no visual step saw (their video was not found, or they name none; "
                   "the report's \"kept without a visual step\").")
@click.option("--out", type=CliPath(file_okay=False), required=True, help="Folder to write the export into.")
def export(results: str, item_paths: tuple[str, ...], columns: str | None, chain: str, fmt: str, removed: bool,
           frames_root: str | None, step0: str | None, store: str | None, video_source: str,
           drop_unscreened: bool, out: str) -> None:
    """Write the kept items of each benchmark (or --removed ones) for your own harness. Each item's
    video is the one it came with (--video-source store: the normalized re-encode).

    \b
    Example:
      benchcheck export --results results --items items/ --format lmms-eval --out export/lmms
    """
    from collections import Counter

    from benchcheck.report.export import (
        Cleanup,
        Pending,
        Selected,
        empty_benches,
        export_frames,
        first_ids,
        partition,
        pending_parts,
        relative_videos,
        select,
        unnamed_videos,
        unsafe_video,
    )
    from benchcheck.report.export import export as run
    from benchcheck.screen.fates import NEVER_SCREENED
    from benchcheck.screen.steps import parse_chain

    need_step_results(results)
    try:
        steps = parse_chain(chain)
    except ValueError as e:
        die(str(e))
    loaded = load_items_reporting(item_paths, columns, quiet=True)
    say_left_out(loaded, item_paths, "export")
    if not loaded.items:
        die("no valid items in --items")
    dups = step0_option(step0)
    finals: Counter[str] = Counter()
    pending: list[Pending] = []
    try:
        selected = select(Path(results), loaded.items, steps, removed,
                          export_frames(Path(frames_root) if frames_root else None), Path(store) if store else None,
                          video_source, finals, dups, pending)
    except ValueError as e:
        die(str(e))
    # a path that leaves the folder a harness reads it from is never written (screening refused it too)
    selected, unsafe = partition(selected, unsafe_video)
    unscreened: list[tuple[Selected, str]] = []
    if drop_unscreened:
        selected, unscreened = partition(selected, lambda s: "unscreened" if s.unscreened else None)
    n = sum(len(v) for v in selected.values())
    label = "removed" if removed else "kept"
    pending_hint = "" if frames_root else "; without --frames an item no visual step has screened yet is pending"
    if step0 is None and any(p.cause == NEVER_SCREENED for p in pending):
        # no run records its --keep; an item it left out is one no step ever screened
        pending_hint += "; an item screen --keep left out is removed at step 0 once --step0 names the step-0 outcome"
    if n == 0:
        # an empty export is no dataset: lmms-eval refuses a group of no task, datasets a folder of no file
        fates = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(finals.items()) if v) or "no items"
        die(f"no {label} item to export ({fates}); nothing written to {out}"
            + (pending_hint if finals.get("pending") else ""))
    from benchcheck.errors import naming

    cleanup = Cleanup()
    with naming(out):  # a full disk or a file size limit names no file: the export folder is the one
        paths = run(fmt, Path(out), selected, removed, cleanup)
    empty = empty_benches(selected)
    benches = counted(len(selected) - len(empty), "benchmark")
    click.echo(f"{counted(n, label + ' item')} of {benches} -> {out}", err=True)

    def names(files: list[Path]) -> str:
        return ", ".join(p.relative_to(out).as_posix() for p in files)

    if cleanup.removed:
        click.echo(f"note: removed {counted(len(cleanup.removed), 'file')} an earlier export wrote for "
                   f"benchmarks not in this "
                   f"one: {names(cleanup.removed)}", err=True)
    if cleanup.changed:
        click.echo(f"note: left {counted(len(cleanup.changed), 'file')} an earlier export wrote for benchmarks "
                   f"not in this one, "
                   f"as they changed since (no longer the export's): {names(cleanup.changed)}; a harness reading "
                   f"{out} whole reads them too", err=True)
    if cleanup.unrecorded:
        # no manifest records them: which of these an export wrote (one by a benchcheck before manifests) is
        # unknown, and a file of the user's is never removed, so the user is told and decides, on every export
        what = fmt if fmt == "parquet" else f"{fmt} {label}"  # Parquet's kept and removed are one dataset
        click.echo(f"note: no record of an earlier {what} export in {out} ({cleanup.unrecorded_why}), so no file "
                   f"was removed; {counted(len(cleanup.unrecorded), 'file')} there are named like its files: "
                   f"{names(cleanup.unrecorded)}; "
                   f"delete those an earlier export wrote (a harness reads the folder whole), or export into an "
                   f"empty folder", err=True)
    elif cleanup.unreadable:
        click.echo(f"note: no earlier export's file removed: its manifest cannot be read: {cleanup.unreadable}",
                   err=True)
    if empty:
        click.echo(f"note: {counted(len(empty), 'benchmark')} without {label} items left out of the export "
                   f"(a harness stops on an empty data file): {', '.join(empty)}", err=True)
    read = dups.deduplicated(loaded.items) if dups is not None else None
    if read is not None and (unread := Counter(it.bench for it in loaded.items if it.bench not in read)):
        from benchcheck.step0.scope import not_deduplicated_note

        note = not_deduplicated_note(unread)  # as the report says it: nothing of them removed at step 0
        click.echo(f"note: {note[0].lower()}{note[1:]}", err=True)
    if undecided := {k: v for k, v in finals.items() if k not in ("kept", "removed") and v}:
        parts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(undecided.items()))
        why = "; ".join(pending_parts(pending))
        click.echo(f"note: {counted(sum(undecided.values()), 'item')} "
                   f"{'is' if sum(undecided.values()) == 1 else 'are'} neither kept nor removed ({parts})"
                   f"{f'; pending: {why}' if why else ''}{pending_hint}", err=True)
    if unsafe:
        click.echo(f"note: {counted(len(unsafe), label + ' item')} left out: a harness would open a file "
                   f"outside the folder "
                   f"it reads videos from, and screening refused the path too (first: "
                   f"{unsafe[0][0].item.item_id}: {unsafe[0][1]})", err=True)
    if unscreened:
        click.echo(f"note: {counted(len(unscreened), 'kept item')} left out that no visual step saw "
                   f"(--drop-unscreened): "
                   f"{first_ids([s.item.item_id for s, _ in unscreened])}", err=True)
    elif not removed and (seen_blind := [s.item.item_id for rows in selected.values() for s in rows if s.unscreened]):
        click.echo(f"note: {counted(len(seen_blind), 'kept item')} no visual step saw (their video was not "
                   f"found, or they name "
                   f"none: kept without a visual step): {first_ids(seen_blind)}; --drop-unscreened leaves them out",
                   err=True)
    if unnamed := unnamed_videos(selected):
        hint = ("no normalized video in --store" if video_source == "store" else
                "only a video_id, which --store's index does not name" if store else
                "only a video_id: give --store so its index names their source files")
        click.echo(f"note: {counted(unnamed, 'item')} {'has' if unnamed == 1 else 'have'} an empty video "
                   f"({hint})", err=True)
    if relative := relative_videos(selected):
        hint = "" if store else "; give --store so its index names their source files by absolute path"
        # Inspect's json_dataset looks for a relative path beside the data file first
        where = ("Inspect opens it relative to the export folder when the file is there, else relative to the "
                 "folder it runs in" if fmt == "inspect" else "a harness opens it relative to the folder it runs in")
        click.echo(f"note: {counted(len(relative), 'item')} "
                   f"{'names its' if len(relative) == 1 else 'name their'} video by a relative path "
                   f"({relative[0]}): {where}{hint}",
                   err=True)
    for p in paths:
        if p.name.endswith(".left_out.jsonl"):
            n_out = len(p.read_text(encoding="utf-8").splitlines())
            click.echo(f"note: {counted(n_out, 'item')} left out of {p.name.removesuffix('.left_out.jsonl')}.tsv "
                       f"(they would not read back as written; reasons in {p})", err=True)
    for p in paths:
        click.echo(str(p))


COMMANDS = [export]
