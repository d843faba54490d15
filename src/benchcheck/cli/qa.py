"""``benchcheck qa run|judge``: the end-to-end video QA benchmark (docs/PROTOCOL.md, "QA benchmark").

Exit codes: 0 every item ok, 2 a precondition failed, 3 any item errored (VLM or judge).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from benchcheck.cli.common import CliPath, FiniteFloatRange, die


class _ReapedAfterTheLoop(logging.Filter):
    """Drops asyncio's "Loop ... that handles pid N is closed": its child watcher says so when a
    process exits after the event loop has closed, as a ``--vlm-cmd`` killed while Ctrl-C ends
    the run can. The process is reaped all the same; the line only followed the run's last one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "that handles pid" not in record.getMessage()


_REAPED_AFTER_THE_LOOP = _ReapedAfterTheLoop()


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``timeout``, Slurm, systemd, ``docker stop``) ends the run as Ctrl-C does: the
    event loop's tasks are cancelled, so each item in flight kills its ``--vlm-cmd`` processes.
    Without it the run died at once and its VLM commands ran on with no watchdog."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    # Kept after the run: the watcher's thread may log it after the run has returned.
    logging.getLogger("asyncio").addFilter(_REAPED_AFTER_THE_LOOP)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _report(outcome: Any) -> None:
    """A few lines on stderr; the numbers themselves are in the output files."""
    s = outcome.summary
    c = s["counts"]
    lat = s["latency_s"]
    acc = "n/a" if s["accuracy"] is None else f"{s['accuracy']:.4f}"
    p50 = "n/a" if lat["p50"] is None else f"{lat['p50']:.2f} s"
    p95 = "n/a" if lat["p95"] is None else f"{lat['p95']:.2f} s"
    click.echo(f"accuracy {acc} over {c['scored']} scored items; {c['vlm_errors']} VLM errors, "
               f"{c['judge_errors']} judge errors, {c.get('dataset_errors', 0)} dataset errors, {c['skipped']} "
               f"skipped; latency p50 {p50}, p95 {p95}", err=True)
    if lat.get("n_other_concurrency"):
        others = ", ".join(k for k in s.get("latency_s_by_concurrency", {}) if k != str(lat.get("concurrency")))
        click.echo(f"latency: over the {lat['n']} items measured at --concurrency {lat.get('concurrency')}; "
                   f"{lat['n_other_concurrency']} answers reused from a run at another --concurrency ({others}) are "
                   "left out (summary.json latency_s_by_concurrency has each apart)", err=True)
    click.echo(f"model served: {s['model_served']}; judge model: {s['judge_model']}", err=True)
    for e in s["errors"][:10]:
        who = f"item {e['id']}" if e.get("id") is not None else f"entry {e.get('entry')}"
        click.echo(f"{who}: {e['error']}", err=True)
    if len(s["errors"]) > 10:
        click.echo(f"... {len(s['errors']) - 10} more errors in summary.json", err=True)
    for note in outcome.notes:
        click.echo(note, err=True)
    click.echo(str(outcome.output_dir / "summary.json"))


def _judge_config(skip: bool, concurrency: int, max_tokens: int, timeout: float, fmt: str = "auto") -> Any:
    import os

    from benchcheck.qa.judge import JudgeConfig

    if skip:
        return None
    return JudgeConfig.from_env(os.environ, concurrency=concurrency, max_tokens=max_tokens, timeout_s=timeout,
                                verdict_format=fmt)


def _judge_options(f: Any) -> Any:
    f = click.option("--judge-format", type=click.Choice(["auto", "json", "line"]), default="auto",
                     show_default=True,
                     help="How the judge gives its verdict: json (a JSON object, sent with response_format), "
                          "line (a last line 'SCORE: <x>'), auto (json, or line when the endpoint refuses "
                          "response_format). A reply without a verdict is asked again, then is a judge error.")(f)
    f = click.option("--judge-timeout", type=FiniteFloatRange(min=1), default=120.0, show_default=True,
                     help="Seconds per judge request (connection errors, 429 and 5xx are retried).")(f)
    f = click.option("--judge-max-tokens", type=click.IntRange(min=16), default=1024, show_default=True,
                     help="Token budget of a judge reply (reasoning judges need more).")(f)
    f = click.option("--judge-concurrency", type=click.IntRange(min=1), default=8, show_default=True,
                     help="Judge requests in flight.")(f)
    return f


@click.group("qa")
def qa() -> None:
    """End-to-end video QA benchmark: a deployed VLM's accuracy (LLM judge) and latency."""


@qa.command("run")
@click.option("--dataset", type=CliPath(dir_okay=False), default=None,
              help="JSON list of {id, query|question, ground_truth, evaluation_method, video} (with --videos).")
@click.option("--videos", type=CliPath(file_okay=False), default=None,
              help="Folder the items' 'video' paths are relative to.")
@click.option("--dataset-name", default=None,
              help="A Dataset Service dataset (e.g. vss-devx-base), with --dataset-file: downloaded with your "
                   "`nvdataset` CLI, or already extracted where VSS_EVAL_DATASET names it.")
@click.option("--dataset-file", default=None,
              help="The QA file inside that dataset (e.g. dataset_single_turn.json).")
@click.option("--dataset-dir", type=CliPath(file_okay=False), default=None,
              help="Where the named dataset is or goes (default: VSS_EVAL_DATASET, else "
                   "agent_eval/dataset/<name>).")
@click.option("--skip-download", is_flag=True, help="Use the named dataset as it is on disk.")
@click.option("--force-download", is_flag=True, help="Download the named dataset again.")
@click.option("--download-timeout", type=FiniteFloatRange(min=1), default=1800.0, show_default=True,
              help="Seconds the nvdataset download may take (then it is killed).")
@click.option("--nvdataset", "nvdataset_bin", default="nvdataset", show_default=True,
              help='The nvdataset CLI (not on PyPI: see site page "QA benchmark").')
@click.option("--output-dir", type=CliPath(file_okay=False), default=None,
              help="Where answers, verdicts and the output files go (a rerun resumes here); default for a named "
                   "dataset: <dataset>/../../results/vlm_qa.")
@click.option("--vlm-cmd", default=None, metavar="TEMPLATE",
              help="Command line run per item without a shell; {video}, {question}, {num_frames}, {timeout} "
                   "must each be a word by itself and become one argument verbatim; it prints "
                   "{\"answer\": ..., \"model\": ...}.")
@click.option("--vlm-endpoint", default=None, metavar="URL", help="OpenAI-compatible base URL of the VLM.")
@click.option("--vlm-model", default=None, help="Model id to request from --vlm-endpoint.")
@click.option("--vlm-api-key-env", default=None, metavar="VAR",
              help="Name of the environment variable whose value is sent to --vlm-endpoint as its key.")
@click.option("--inline-media", is_flag=True,
              help="Send the clip inline as base64 (safe below ~10 MB; warns above). Endpoint: a data: URL; "
                   "command: {inline_media} becomes --inline-media and BENCHCHECK_QA_INLINE_MEDIA=1 is set.")
@click.option("--video-url-base", default=None, metavar="URL",
              help="Endpoint mode: send the clip as a video URL, <URL>/<video path>, for the server to fetch.")
@click.option("--num-frames", type=click.IntRange(min=1), default=8, show_default=True,
              help="Frames per clip (sampled here in endpoint mode; passed as {num_frames} to a command).")
@click.option("--max-side", type=click.IntRange(min=0), default=768, show_default=True,
              help="Endpoint frames: long side in pixels (0 keeps the stored size).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=512, show_default=True,
              help="Endpoint mode: answer token budget.")
@click.option("--timeout", type=FiniteFloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Seconds per VLM call, the only limit (no retries).")
@click.option("--watchdog-grace", type=FiniteFloatRange(min=0), default=60.0, show_default=True,
              help="The watchdog kills an item's whole process group --timeout + this many seconds after start.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="VLM calls in flight (1 measures unloaded latency).")
@click.option("--skip-judge", is_flag=True, help="Latency only: no judge is called or needed.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Run the first N runnable items only.")
@click.option("--vlm-env", multiple=True, metavar="NAME",
              help="Pass this environment variable to the --vlm-cmd child even though its name looks like a "
                   "secret (repeatable). The child gets the environment minus the judge's EVAL_LLM_JUDGE_* "
                   "variables and every *_API_KEY, *_KEY, *_TOKEN, *_SECRET, *PASSWORD* (and similar) variable.")
@_judge_options
def run(dataset: str | None, videos: str | None, dataset_name: str | None, dataset_file: str | None,
        dataset_dir: str | None, skip_download: bool, force_download: bool, download_timeout: float,
        nvdataset_bin: str, output_dir: str | None, vlm_cmd: str | None, vlm_endpoint: str | None,
        vlm_model: str | None, vlm_api_key_env: str | None, inline_media: bool, video_url_base: str | None,
        num_frames: int, max_side: int, max_tokens: int, timeout: float, watchdog_grace: float,
        concurrency: int, skip_judge: bool, limit: int | None, vlm_env: tuple[str, ...], judge_format: str,
        judge_concurrency: int, judge_max_tokens: int, judge_timeout: float) -> None:
    """Ask the VLM every qa item, time it, score it with the LLM judge, write the outputs.

    The judge is read from EVAL_LLM_JUDGE_BASE_URL, EVAL_LLM_JUDGE_NAME and EVAL_LLM_JUDGE_API_KEY;
    only that key is sent, and only to that host. The --vlm-cmd child never sees the judge's
    variables nor any secret-named variable (*_API_KEY, *_TOKEN, *_SECRET, *PASSWORD*...) unless
    passed with --vlm-env NAME; everything else (the VLM CLI's own settings) passes as it is.
    When the command's main process exits, everything it started is ended (its process group,
    and children that left it with setsid).

    Exit 0: every item ok; 2: a precondition failed (unreadable dataset, no runnable qa item, no
    judge settings); 3: an item errored (a VLM error, a judge error, or a qa entry of the dataset
    that cannot run; never counted as a low score). Entries that are not qa are skipped and
    counted, not errors.

    A named dataset (--dataset-name and --dataset-file, both required) is downloaded with your
    `nvdataset` CLI (credential: NVDATASET_API_KEY, else NVDATASET_NGC_API_KEY, else NGC_API_KEY;
    tenancy: NVDATASET_TENANTID / NVDATASET_GROUPID), or used as extracted where VSS_EVAL_DATASET
    names it; exit 3 when the download fails (its hint is printed).

    \b
    Example:
      benchcheck qa run --dataset qa.json --videos clips --output-dir out/qa \\
        --vlm-cmd "myvlm {video} {question}" --vlm-env NGC_API_KEY
      benchcheck qa run --dataset-name vss-devx-base --dataset-file dataset_single_turn.json \\
        --vlm-cmd "vss vlm run --file {video} --prompt {question} --timeout {timeout}"
    """
    import asyncio
    import os
    from pathlib import Path

    from benchcheck.masking import Masker
    from benchcheck.qa.errors import PreconditionError
    from benchcheck.qa.runner import RunOptions, run_qa
    from benchcheck.qa.vlm import VLMOptions, make_vlm

    if vlm_cmd is not None:
        from benchcheck.qa.proc import enable_subreaper

        enable_subreaper()  # orphans of a --vlm-cmd come back to this process to be ended
    # The VLM key's variable may have any name: its value is masked like the usual secrets.
    redactor = Masker.from_env(extra=[os.environ.get(vlm_api_key_env, "")] if vlm_api_key_env else [])
    vopts = VLMOptions(vlm_cmd, vlm_endpoint, vlm_model, vlm_api_key_env, inline_media, video_url_base,
                       max_side, max_tokens, vlm_env)

    def echo(m: str) -> None:
        click.echo(redactor.text(m), err=True)

    try:
        # Everything that can be checked is checked before a download that may take half an hour.
        named = _named_dataset(dataset, videos, dataset_name, dataset_file, dataset_dir, output_dir)
        judge = _judge_config(skip_judge, judge_concurrency, judge_max_tokens, judge_timeout, judge_format)
        vlm = make_vlm(vopts, num_frames=num_frames, timeout_s=timeout, watchdog_grace_s=watchdog_grace,
                       concurrency=concurrency, redactor=redactor,
                       warn=lambda m: click.echo(f"warning: {redactor.text(m)}", err=True))
        if named is not None:
            from benchcheck.qa.dataset_fetch import DownloadError, prepare

            try:
                prepare(named, os.environ, skip_download=skip_download, force_download=force_download,
                        nvdataset=nvdataset_bin, timeout_s=download_timeout, echo=echo,
                        hidden=(vlm_api_key_env,) if vlm_api_key_env else ())
            except DownloadError as e:
                die(redactor.text(str(e)), 3)
            out = Path(output_dir) if output_dir else named.default_output
            echo(f"outputs: {out}")
            opts = RunOptions(named.dataset, named.videos, out, num_frames=num_frames, timeout_s=timeout,
                              watchdog_grace_s=watchdog_grace, concurrency=concurrency, limit=limit,
                              match_clips=True, dataset_name=named.name)
        else:
            assert dataset is not None and videos is not None and output_dir is not None
            opts = RunOptions(Path(dataset), Path(videos), Path(output_dir), num_frames=num_frames, timeout_s=timeout,
                              watchdog_grace_s=watchdog_grace, concurrency=concurrency, limit=limit)
        with _sigterm_as_interrupt():
            outcome = asyncio.run(run_qa(opts, vlm, judge, redactor, echo=echo))
    except PreconditionError as e:
        die(redactor.text(str(e)))
    _report(outcome)
    sys.exit(outcome.exit_code)


def _named_dataset(dataset: str | None, videos: str | None, name: str | None, file: str | None,
                   dataset_dir: str | None, output_dir: str | None) -> Any:
    """The named dataset's place (``None``: a --dataset file); a wrong combination is a PreconditionError."""
    import os

    from benchcheck.qa.dataset_fetch import place
    from benchcheck.qa.errors import PreconditionError

    if name is not None or file is not None:
        if dataset is not None or videos is not None:
            raise PreconditionError("give either --dataset-name with --dataset-file, or --dataset with --videos")
        if name is None or file is None:
            raise PreconditionError("--dataset-name and --dataset-file are both required: no dataset is assumed "
                                    "(e.g. --dataset-name vss-devx-base --dataset-file dataset_single_turn.json)")
        return place(name, file, dataset_dir, os.environ)
    if dataset is None or videos is None:
        raise PreconditionError("give --dataset FILE with --videos DIR, or --dataset-name NAME with --dataset-file "
                                "FILE (a Dataset Service dataset)")
    if output_dir is None:
        raise PreconditionError("--output-dir is required with --dataset (it defaults only for a named dataset)")
    return None


@qa.command("judge")
@click.option("--output-dir", type=CliPath(file_okay=False, exists=True), required=True,
              help="The folder of a finished `qa run`.")
@_judge_options
def judge(output_dir: str, judge_format: str, judge_concurrency: int, judge_max_tokens: int,
          judge_timeout: float) -> None:
    """Re-judge the stored answers of a run (no VLM calls) and rewrite its outputs.

    Verdicts already in the folder's judge cache for the same judge model and prompt version
    are reused; set EVAL_LLM_JUDGE_NAME to another model to score with it. Exit codes as `qa run`.

    \b
    Example:
      benchcheck qa judge --output-dir out/qa
    """
    import asyncio
    from pathlib import Path

    from benchcheck.masking import Masker
    from benchcheck.qa.errors import PreconditionError
    from benchcheck.qa.runner import judge_stored

    redactor = Masker.from_env()
    try:
        config = _judge_config(False, judge_concurrency, judge_max_tokens, judge_timeout, judge_format)
        with _sigterm_as_interrupt():
            outcome = asyncio.run(judge_stored(Path(output_dir), config, redactor))
    except PreconditionError as e:
        die(redactor.text(str(e)))
    _report(outcome)
    sys.exit(outcome.exit_code)


COMMANDS = [qa]
