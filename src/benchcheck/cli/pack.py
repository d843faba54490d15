"""``benchcheck pack``: the results tarball, its sha256 file and the report; optional upload."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from benchcheck.cli.common import CliPath, die


@click.command("pack")
@click.option("--results", type=CliPath(exists=True, file_okay=False, path_type=Path), required=True,
              help="Results folder: step*/ (pool) or conditions_results.csv + p1_raw/ (sweep).")
@click.option("--logs", type=CliPath(exists=True, file_okay=False, path_type=Path), multiple=True,
              help="Log folder to include (repeatable, e.g. --logs logs --logs data/logs); every text "
                   "file in it (decided by content; UTF-8/16/32, gzip/bzip2/xz too) goes in with secrets "
                   "masked, and files that cannot be checked (binary) are left out and listed.")
@click.option("--include-unchecked", is_flag=True,
              help="Pack the log files that cannot be checked for secrets as they are (still listed).")
@click.option("--out", type=CliPath(dir_okay=False, path_type=Path), default=None,
              help="Tarball path (default pool_returns_<host>_<date>.tar.gz or fp_returns_... for a sweep).")
@click.option("--launcher-changes", default="", help="What you changed in the launcher (goes into the report).")
@click.option("--upload", "repo", default=None, help="Dataset repo to upload to (needs a configured token).")
@click.option("--path-in-repo", default="returns", show_default=True,
              help="Folder (or exact .tar.gz path) in the repo for the upload.")
def pack_cmd(results: Path, logs: tuple[Path, ...], include_unchecked: bool, out: Path | None,
             launcher_changes: str, repo: str | None, path_in_repo: str) -> None:
    """Pack results and logs into a tarball with a sha256sum file and a report (JSON + Markdown).

    The report gives per step (or sweep condition): items done, removed, error rows with example
    item ids, wall time, items/s per GPU, rows added, the server launch lines (secrets redacted)
    and launcher changes. Result files are data and go in as they are; log files are masked
    (--api-key values, Bearer tokens, hf_ tokens, values of *_API_KEY/*_TOKEN/*_SECRET variables).
    With --upload the four files go to the dataset repo in one commit;
    without a token it says so, leaves the files ready to send and exits 2. Exit 3 when the
    upload fails.

    \b
    Example:
      benchcheck pack --results results/pool --logs logs --upload GMLRVigil/BenchCheck-Pool --path-in-repo returns/
    """
    from benchcheck.data.pack import PackOptions, UploadError, pack, repo_paths, upload

    if repo is not None:
        try:
            repo_paths(path_in_repo, "x.tar.gz")
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--path-in-repo") from e
    try:
        res = pack(PackOptions(results, logs, out, launcher_note=launcher_changes,
                              include_unchecked=include_unchecked))
    except ValueError as e:
        die(str(e))
        return
    except OSError as e:  # a file it cannot read, a full disk: the file and what is wrong, no .partial left
        from benchcheck.errors import os_error_line

        die(os_error_line(e), 1)
        return
    for f in res.files:
        click.echo(f"wrote {f}")
    # Absolute and quoted for the shell: pasted anywhere, a folder with spaces or `$` stays one word.
    check = f"cd {shlex.quote(str(res.tarball.parent.resolve()))} && sha256sum -c {shlex.quote(res.sha256_file.name)}"
    click.echo(f"sha256 {res.sha256}  (check: {check})")
    if (a := res.report.analysis) is not None:
        n = len(a["files"])
        click.echo(f"analysis: {n} file{'s' * (n != 1)} from {a['folder']} ({a['found_by']})")
    for note in res.report.notes:
        click.echo(f"note: {note}", err=True)
    if repo is None:
        return
    try:
        url = upload(res, repo, path_in_repo)
    except UploadError as e:
        click.echo(f"upload: {e}", err=True)
        click.echo("files ready to send by any transfer: " + " ".join(str(f) for f in res.files), err=True)
        sys.exit(2 if "no Hugging Face token" in str(e) else 3)
    click.echo(f"uploaded to {url}")


COMMANDS = [pack_cmd]
