"""``benchcheck frames extract``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from benchcheck.cli.common import CliPath, checked_store, die, load_items_reporting
from benchcheck.cli.videos import videos_option
from benchcheck.video.plans import PROMPT_RESERVE, TOKEN_BUDGET


@click.group("frames")
def frames() -> None:
    """Extract frame caches from the normalized store (the protocol: `benchcheck protocol "frame plans"`)."""


@frames.command("extract")
@click.option("--store", required=True, type=CliPath(path_type=Path), callback=checked_store,
              help="The normalized store (made by 'benchcheck videos normalize').")
@click.option("--items", "items", multiple=True, type=CliPath(exists=True),
              help="Item files or folders (repeatable); their videos are extracted (named by video_id, "
                   'store key or path: site page "Items"). Without --items: every video in the store.')
@videos_option
@click.option("--columns", default=None, help="Column map for CSV/Parquet items, e.g. 'video_id=vid'.")
@click.option("--plan", default="v32", show_default=True,
              help="v32, mid, v_1, v_<N>[_s<S>], v_fps<F>_s<S>; aliases such as fps1_s224, 32_s224.")
@click.option("--out", required=True, type=CliPath(file_okay=False, path_type=Path),
              help="Frame cache root: <out>/<video_id>/frame_<k>.jpg + frames.json.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--jpeg-quality", default=85, show_default=True, type=click.IntRange(1, 100))
@click.option("--token-budget", default=TOKEN_BUDGET, show_default=True, type=click.IntRange(min=PROMPT_RESERVE + 1),
              help="fps plans: context budget.")
@click.option("--max-images", default=1024, show_default=True, type=click.IntRange(min=1),
              help="fps plans: most frames sent.")
@click.option("--force", is_flag=True, help="Replace cache folders that hold another plan.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def extract(store: Path, items: tuple[str, ...], videos_dir: str | None, columns: str | None, plan: str, out: Path,
            workers: int, jpeg_quality: int, token_budget: int, max_images: int, force: bool,
            no_progress: bool) -> None:
    """Extract the frames of a plan for the items' videos into a frame cache. Resumable: videos
    already cached are skipped. Failures go to <out>/failures.jsonl; exit 1 if any.

    \b
    Example:
      benchcheck frames extract --store store --items items/ --plan v32 --out pool_frames --workers 2
    """
    from benchcheck.video.batch import extract_many
    from benchcheck.video.meta import normalized_ids
    from benchcheck.video.plans import parse_plan
    from benchcheck.video.resolve import report_unresolved, resolve_items

    try:
        parse_plan(plan)
    except ValueError as e:
        die(str(e))
    if videos_dir is not None and not Path(videos_dir).is_dir():
        die(f"--videos {videos_dir}: no such folder")
    if items:
        loaded = load_items_reporting(items, columns)
        resolved = resolve_items(loaded.items, store, videos_dir)
        report_unresolved(resolved, lambda line: click.echo(line, err=True))
        ids = list(dict.fromkeys(r.video_id for r in resolved.resolutions if r.found and r.video_id))
        if (without := len(resolved.resolutions) - resolved.count("stored")) and ids:
            why = "the 'no video:' lines above" if resolved.unresolved else resolved.summary()
            click.echo(f"note: {without} items have no normalized video ({why})", err=True)
        if not ids:
            why = resolved.summary() if loaded.items else "no valid items in --items"
            die(f"nothing to extract: no item reaches a video in {store} ({why})")
    else:
        ids = normalized_ids(store)
        if not ids:
            die(f"nothing to extract: {store} holds no normalized video (run 'benchcheck videos normalize "
                f"VIDEOS --store {store}' first)")
    report = extract_many(store, ids, plan, out, workers, jpeg_quality=jpeg_quality, token_budget=token_budget,
                          max_images=max_images, force=force, progress=not no_progress)
    for vid, reason in report.failures:
        click.echo(f"failed: {vid}: {reason}", err=True)
    click.echo(report.summary())
    sys.exit(1 if report.failures else 0)


COMMANDS = [frames]
