"""``benchcheck videos normalize``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from benchcheck.cli.common import CliPath
from benchcheck.items import Item

F = TypeVar("F", bound=Callable[..., Any])


def videos_option(f: F) -> F:
    """``--videos DIR``: the folder the items' ``video`` paths are relative to."""
    return click.option("--videos", "videos_dir", type=CliPath(file_okay=False), default=None,
                        help="Folder the items' 'video' paths are relative to (paths never leave it).")(f)


def resolve_reporting(items: Sequence[Item], store: str | Path | None, videos: str | Path | None,
                      quiet: bool = False) -> list[Item]:
    """The items with their videos resolved (``video.resolve``); one stderr line per item whose
    video was not reached, then the counts. Without a key or path to resolve, the items as they are."""
    from benchcheck.video.resolve import needs_resolving, report_unresolved, resolve_items

    if videos is not None and not Path(videos).is_dir():
        raise click.UsageError(f"--videos {videos}: no such folder")
    if store is None and videos is None and not needs_resolving(items):
        return list(items)
    resolved = resolve_items(items, store, videos)
    if not quiet:
        report_unresolved(resolved, lambda line: click.echo(line, err=True))
    return resolved.items


@click.group("videos")
def videos() -> None:
    """Normalize source videos into the store (the protocol: `benchcheck protocol videos`)."""


@videos.command("normalize")
@click.argument("sources", nargs=-1, required=True, type=CliPath(exists=True, path_type=Path))
@click.option("--store", required=True, type=CliPath(file_okay=False, path_type=Path),
              help="Store folder: normalized/<content_hash>/, index.jsonl, failures.jsonl.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Worker processes (each decodes with cores/workers threads).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def normalize(sources: tuple[Path, ...], store: Path, workers: int, no_progress: bool) -> None:
    """Normalize video files and folders: 2 fps (at most 1,024 frames), short side 720 (480
    beyond 30 min), H.264. Idempotent; broken files go to failures.jsonl. Exit 1 if any failed.

    \b
    Example:
      benchcheck videos normalize raw_videos/ extra/clip.mp4 --store store --workers 2
    """
    from benchcheck.cli.common import die
    from benchcheck.errors import shown
    from benchcheck.video.store import VIDEO_EXTENSIONS, StoreBusy, collect_sources, normalize_videos

    # Folders without a video file would give "0 normalized" and exit 0: a wrong folder looks like success.
    if not collect_sources(list(sources), store=store):
        die(f"no video file ({', '.join(sorted(VIDEO_EXTENSIONS))}) in {', '.join(map(shown, sources))}")
    try:
        report = normalize_videos(list(sources), store, workers=workers, progress=not no_progress)
    except StoreBusy as e:
        die(str(e))
    for line in report.lines():
        click.echo(line, err=True)
    click.echo(report.summary())
    click.echo(f"index: {report.index_path}")
    if report.failures:
        click.echo(f"failures: {report.failures_path}")
    sys.exit(1 if report.failures else 0)


COMMANDS = [videos]
