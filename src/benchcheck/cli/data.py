"""``benchcheck data fetch|verify|make-shards``: run packages in, checked (docs/PROTOCOL.md, "Returns")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import click

from benchcheck.cli.common import CliPath, die


@click.group("data")
def data() -> None:
    """Fetch, verify and build run packages (items, frame shards, video shards)."""


@data.command("fetch")
@click.argument("repo")
@click.option("--kind", type=click.Choice(["frames", "videos", "items"]), required=True,
              help="frames/videos: manifest + tar shards, verified and extracted; items: every other file.")
@click.option("--out", "out", type=CliPath(file_okay=False, path_type=Path), required=True,
              help="Package folder: shards go to OUT/<kind>_tar, items to OUT.")
@click.option("--revision", default="main", show_default=True, help="Branch, tag or commit of the dataset repo.")
@click.option("--target", type=CliPath(file_okay=False, path_type=Path), default=None,
              help="Extract here instead of OUT/frames/pool_frames or OUT/store/normalized.")
@click.option("--delete-shards", is_flag=True, help="Remove each tar once it is verified and extracted.")
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Shards downloaded at once (and at most this many ahead of extraction).")
def fetch(repo: str, kind: str, out: Path, revision: str, target: Path | None, delete_shards: bool,
          workers: int) -> None:
    """Download a dataset repo from the Hugging Face Hub, verify every shard, extract, count videos.

    Every shard is checked against the manifest's sha256 before it is extracted; a bad shard is
    reported and not extracted. Extraction never writes outside the target. A rerun downloads
    and extracts only what is missing. HF_ENDPOINT and HF_TOKEN are honoured. Exit 0 when every
    shard is good and the video count matches n_videos, 1 otherwise, 2 when the repository or
    manifest cannot be used.

    \b
    Example:
      benchcheck data fetch GMLRVigil/BenchCheck-Pool-Frames --kind frames --out pool --delete-shards
    """
    from tqdm import tqdm

    from benchcheck.data.fetch import FetchError, FetchKind, FetchOptions, fetch_items, fetch_shards
    from benchcheck.data.manifest import ManifestError

    opts = FetchOptions(repo, cast(FetchKind, kind), out, revision, target, delete_shards, workers)
    try:
        if kind == "items":
            items = fetch_items(opts, on_file=lambda p: click.echo(f"{p}: OK"))
            for p in items.problems:
                click.echo(p)
            n, bad = len(items.files), len(items.problems)
            click.echo(f"items: {n} file{'s' * (n != 1)} fetched into {out}, {bad} problem{'s' * (bad != 1)}")
            sys.exit(0 if items.good else 1)
        with tqdm(desc="extract", unit="B", unit_scale=True, file=sys.stderr, disable=None) as bar:
            report = fetch_shards(opts, on_verdict=lambda v: tqdm.write(v.line()), on_bytes=bar.update)
    except (FetchError, ManifestError) as e:
        die(str(e))
        return
    assert report.count is not None
    click.echo(report.count.line())
    click.echo(report.summary())
    sys.exit(0 if report.good else 1)


@data.command("verify")
@click.argument("path", type=CliPath(exists=True, path_type=Path))
@click.option("--target", type=CliPath(file_okay=False, path_type=Path), default=None,
              help="Extraction folder to count videos in (default: the one the fetch recorded).")
def verify(path: Path, target: Path | None) -> None:
    """Check what is on disk: each shard's sha256 (or its logged extraction) and the video count.

    PATH is a fetch folder (it finds .benchcheck/fetch_*.json) or a folder holding a
    frames_manifest.json / videos_manifest.json. One line per shard, then the count. Exit 0 when
    all is good, 1 otherwise, 2 when PATH holds no manifest.

    \b
    Example:
      benchcheck data verify pool
    """
    from benchcheck.data.manifest import ManifestError
    from benchcheck.data.verify import find_targets, verify_manifest

    try:
        targets = find_targets(path, target)
        good = True
        for t in targets:
            rep = verify_manifest(t.manifest, t.kind, t.target, t.out, on_shard=lambda v: click.echo(v.line()))
            if rep.count is not None:
                click.echo(rep.count.line())
            else:
                click.echo("videos: not counted (no target; pass --target)")
            click.echo(rep.summary())
            good = good and rep.good
    except ManifestError as e:
        die(str(e))
        return
    sys.exit(0 if good else 1)


@data.command("make-shards")
@click.argument("src", type=CliPath(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", type=CliPath(file_okay=False, path_type=Path), required=True,
              help="Folder for the shards and the manifest.")
@click.option("--shard-size", default="2GB", show_default=True, help="Target shard size (2GB, 500MiB, bytes).")
@click.option("--kind", type=click.Choice(["frames", "videos"]), default=None,
              help="Default: frames when folders hold frames.json, videos when they hold meta.json.")
def make_shards_cmd(src: Path, out: Path, shard_size: str, kind: str | None) -> None:
    """Pack a frame cache (pool_frames/) or a video store (normalized/) into tar shards + manifest.

    Writes frames_NNN.tar or videos_NNN.tar and frames_manifest.json / videos_manifest.json
    ({"shards": [{"file", "sha256", "size", "n_videos"}], "n_videos", "kind", "schema_version"}),
    each video folder whole in one shard. Upload OUT as a dataset repo to publish a package.

    \b
    Example:
      benchcheck data make-shards frames/pool_frames --out frames_tar --shard-size 2GB
    """
    from tqdm import tqdm

    from benchcheck.data.manifest import ShardKind
    from benchcheck.data.shards import make_shards, parse_size

    try:
        size = parse_size(shard_size)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--shard-size") from e
    try:
        with tqdm(desc="pack", unit="B", unit_scale=True, file=sys.stderr, disable=None) as bar:
            res = make_shards(src, out, size, cast(ShardKind | None, kind), on_bytes=bar.update)
    except ValueError as e:
        die(str(e))
        return
    except OSError as e:  # a source file it cannot read, a full disk: the file and what is wrong
        from benchcheck.errors import os_error_line

        die(os_error_line(e), 1)
        return
    for p in res.problems:
        click.echo(f"skipped: {p}", err=True)
    for name in res.stale:
        click.echo(f"note: {out / name} is not in the new manifest (left from an earlier run)", err=True)
    for s in res.manifest.shards:
        click.echo(f"{s.file}: {s.n_videos} videos, {s.size} bytes, sha256 {s.sha256}")
    click.echo(f"{res.manifest_path}: {len(res.manifest.shards)} shards, n_videos {res.manifest.n_videos}")


COMMANDS = [data]
