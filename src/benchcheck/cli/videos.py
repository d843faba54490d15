"""``benchcheck videos normalize``."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.group("videos")
def videos() -> None:
    """Normalize source videos into the store (the protocol: `benchcheck protocol videos`)."""


@videos.command("normalize")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--store", required=True, type=click.Path(file_okay=False, path_type=Path),
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
    from benchcheck.video.store import normalize_videos

    report = normalize_videos(list(sources), store, workers=workers, progress=not no_progress)
    for f in report.failures:
        click.echo(f"failed: {f.path}: {f.reason}", err=True)
    click.echo(report.summary())
    click.echo(f"index: {report.index_path}")
    if report.failures:
        click.echo(f"failures: {report.failures_path}")
    sys.exit(1 if report.failures else 0)


COMMANDS = [videos]
