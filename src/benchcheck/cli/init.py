"""``benchcheck init``: a folder of videos and an items file -> a project folder ready to screen."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from benchcheck.cli.common import CliPath, die, load_items_reporting

NEXT = """\
next, in a shell; E is the engine. Real decisions: E="--engine openai --endpoint http://HOST:PORT/v1 --model NAME"
(any vLLM / OpenAI-compatible server returning log-probs; NAME as its /v1/models lists it) or
E="--engine hf --model CHECKPOINT --device cuda";
scripted, reference, reference-prior and tiny random models are for tests and the demo:
  P={p}
  for s in 1 2 3 4 5 6; do benchcheck screen --items $P/items --results $P/results --frames $P/frames \\
      --store $P/store --step $s $E; done
  benchcheck sweep run --items $P/items --store $P/store --results $P/sweep/results $E
  benchcheck sweep analyze --results $P/sweep/results --out $P/sweep/analysis
  benchcheck audit --results $P/results --items $P/items --out $P/audit
  benchcheck report --results $P/results --items $P/items --frames $P/frames --sweep $P/sweep --audit $P/audit \\
      --out $P/report
  benchcheck export --results $P/results --items $P/items --frames $P/frames --store $P/store \\
      --format parquet --out $P/export"""


@click.command("init")
@click.option("--videos", "videos_dir", type=CliPath(file_okay=False, path_type=Path), default=None,
              help="Folder of your videos; the items' 'video' paths are relative to it.")
@click.option("--items", "item_paths", multiple=True, type=CliPath(exists=True),
              help='Your item files or folders (repeatable): JSONL, JSON, CSV, Parquet (site page "Items").')
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--out", type=CliPath(file_okay=False, path_type=Path), default=None,
              help="Project folder: store/, items/ (video_ids filled in), frames/.")
@click.option("--example", type=CliPath(file_okay=False, path_type=Path), default=None,
              help="Instead: write a tiny example benchmark here (videos/*.mp4 + mybench.jsonl) to copy.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def init(videos_dir: Path | None, item_paths: tuple[str, ...], columns: str | None, out: Path | None,
         example: Path | None, workers: int, no_progress: bool) -> None:
    """Normalize the videos into OUT/store, write the items with their video_ids into OUT/items,
    extract the screening frames into OUT/frames, and print the commands that screen, sweep,
    audit, report and export. Rerunnable (each stage skips what is done). Exit 2 when no item
    reaches a video (the 'no video:' lines say why).

    \b
    Example:
      benchcheck init --videos my_videos --items my_items.jsonl --out proj
      benchcheck init --example mine
    """
    if example is not None:
        from benchcheck.demo.example import ExampleExists, write_example

        try:
            v, i = write_example(example)
        except ExampleExists as e:
            die(str(e))
        click.echo(f"example: {i} names its clips by file name in {v}; next:\n"
                   f"  benchcheck init --videos {v} --items {i} --out proj")
        return
    if videos_dir is None or not item_paths or out is None:
        die("give --videos DIR, --items FILE and --out DIR (or --example DIR)")
    assert videos_dir is not None and out is not None
    if not videos_dir.is_dir():
        die(f"--videos {videos_dir}: no such folder")
    from benchcheck.video.batch import extract_many
    from benchcheck.video.link import write_linked
    from benchcheck.video.resolve import report_unresolved, resolve_items
    from benchcheck.video.store import StoreBusy, normalize_videos

    loaded = load_items_reporting(item_paths, columns)
    if not loaded.items:
        die("no valid items in --items (the 'bad item' lines say why)")
    store = out / "store"
    try:
        norm = normalize_videos([videos_dir], store, workers=workers, progress=not no_progress)
    except StoreBusy as e:
        die(str(e))
    for line in norm.lines():
        click.echo(line, err=True)
    click.echo(f"1/3 videos -> {store}: {norm.summary()}")
    resolved = resolve_items(loaded.items, store, videos_dir)
    report_unresolved(resolved, lambda line: click.echo(line, err=True), summary=False)
    files = write_linked(resolved.items, out / "items")
    click.echo(f"2/3 items -> {out / 'items'}: {len(files)} file{'s' * (len(files) != 1)}; {resolved.summary()}")
    ids = list(dict.fromkeys(r.video_id for r in resolved.resolutions if r.found and r.video_id))
    if not ids:
        die("no item reaches a video (the 'no video:' lines say why); the visual steps would have nothing to show")
    frames = extract_many(store, ids, "v32", out / "frames", workers, progress=not no_progress)
    for vid, reason in frames.failures:
        click.echo(f"failed: {vid}: {reason}", err=True)
    click.echo(f"3/3 frames -> {out / 'frames'}: {frames.summary()}")
    click.echo(NEXT.format(p=out))
    sys.exit(1 if norm.failures or frames.failures else 0)


COMMANDS = [init]
