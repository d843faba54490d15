"""``benchcheck qa run|judge``: the end-to-end video QA benchmark (docs/PROTOCOL.md, "QA benchmark").

Exit codes: 0 every item ok, 2 a precondition failed, 3 any item errored (VLM or judge).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from benchcheck.cli.common import die


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
    f = click.option("--judge-timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
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
@click.option("--dataset", type=click.Path(dir_okay=False), required=True,
              help="JSON list of {id, query|question, ground_truth, evaluation_method, video}.")
@click.option("--videos", type=click.Path(file_okay=False), required=True,
              help="Folder the items' 'video' paths are relative to.")
@click.option("--output-dir", type=click.Path(file_okay=False), required=True,
              help="Where answers, verdicts and the output files go (a rerun resumes here).")
@click.option("--vlm-cmd", default=None, metavar="TEMPLATE",
              help="Command line run per item without a shell; {video}, {question}, {num_frames}, {timeout} "
                   "must each be a word by itself and become one argument verbatim; it prints "
                   "{\"answer\": ..., \"model\": ...}.")
@click.option("--vlm-endpoint", default=None, metavar="URL", help="OpenAI-compatible base URL of the VLM.")
@click.option("--vlm-model", default=None, help="Model id to request from --vlm-endpoint.")
@click.option("--vlm-api-key-env", default=None, metavar="VAR",
              help="Name of the environment variable whose value is sent to --vlm-endpoint as its key.")
@click.option("--inline-media", is_flag=True,
              help="Endpoint mode: send the clip inline as base64 (safe below ~10 MB; warns above).")
@click.option("--video-url-base", default=None, metavar="URL",
              help="Endpoint mode: send the clip as a video URL, <URL>/<video path>, for the server to fetch.")
@click.option("--num-frames", type=click.IntRange(min=1), default=8, show_default=True,
              help="Frames per clip (sampled here in endpoint mode; passed as {num_frames} to a command).")
@click.option("--max-side", type=click.IntRange(min=0), default=768, show_default=True,
              help="Endpoint frames: long side in pixels (0 keeps the stored size).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=512, show_default=True,
              help="Endpoint mode: answer token budget.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Seconds per VLM call, the only limit (no retries).")
@click.option("--watchdog-grace", type=click.FloatRange(min=0), default=60.0, show_default=True,
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
def run(dataset: str, videos: str, output_dir: str, vlm_cmd: str | None, vlm_endpoint: str | None,
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

    \b
    Example:
      benchcheck qa run --dataset qa.json --videos clips --output-dir out/qa \\
        --vlm-cmd "myvlm {video} {question}" --vlm-env NGC_API_KEY
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
    opts = RunOptions(Path(dataset), Path(videos), Path(output_dir), num_frames=num_frames, timeout_s=timeout,
                      watchdog_grace_s=watchdog_grace, concurrency=concurrency, limit=limit)
    vopts = VLMOptions(vlm_cmd, vlm_endpoint, vlm_model, vlm_api_key_env, inline_media, video_url_base,
                       max_side, max_tokens, vlm_env)
    try:
        judge = _judge_config(skip_judge, judge_concurrency, judge_max_tokens, judge_timeout, judge_format)
        vlm = make_vlm(vopts, num_frames=num_frames, timeout_s=timeout, watchdog_grace_s=watchdog_grace,
                       concurrency=concurrency, redactor=redactor,
                       warn=lambda m: click.echo(f"warning: {redactor.text(m)}", err=True))
        outcome = asyncio.run(run_qa(opts, vlm, judge, redactor, echo=lambda m: click.echo(m, err=True)))
    except PreconditionError as e:
        die(redactor.text(str(e)))
    _report(outcome)
    sys.exit(outcome.exit_code)


@qa.command("judge")
@click.option("--output-dir", type=click.Path(file_okay=False, exists=True), required=True,
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
        outcome = asyncio.run(judge_stored(Path(output_dir), config, redactor))
    except PreconditionError as e:
        die(redactor.text(str(e)))
    _report(outcome)
    sys.exit(outcome.exit_code)


COMMANDS = [qa]
