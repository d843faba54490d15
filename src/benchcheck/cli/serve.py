"""``benchcheck serve``: an OpenAI-compatible server over the ``hf`` or ``scripted`` engine."""

from __future__ import annotations

import os
import signal

import click

from benchcheck.cli.common import CliPath, FiniteFloatRange
from benchcheck.engines.registry import SERVABLE


@click.command("serve")
@click.option("--model", required=True, help="hf: checkpoint folder or hub name; scripted: a label for the model.")
@click.option("--engine", "engine_name", type=click.Choice(list(SERVABLE)), default="hf", show_default=True)
@click.option("--rules", type=CliPath(exists=True, dir_okay=False), help="Rules file (JSON) of the scripted engine.")
@click.option("--revision", default=None, help="hf: pinned revision of a hub model.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback by default).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--served-model-name", default=None, help="Model id reported and accepted (default: --model).")
@click.option("--api-key", envvar="BENCHCHECK_API_KEY", default=None,
              help="Require 'Authorization: Bearer KEY' on /v1 routes (or set BENCHCHECK_API_KEY).")
@click.option("--max-batch-size", default=64, show_default=True, type=click.IntRange(min=1),
              help="Most requests passed to the engine in one call.")
@click.option("--max-model-len", default=65536, show_default=True, type=click.IntRange(min=1),
              help="scripted: context length for the context-too-long check (hf reads its config).")
@click.option("--device", default="auto", show_default=True, help="hf: cpu, cuda or auto.")
@click.option("--hf-config", "hf_config", multiple=True, metavar="KEY=VALUE|FILE.json",
              help="hf engine: a knob of HFConfig (repeatable; ops=-swiglu,+pacing) or a JSON file of them "
                   "(docs/models_hf.md, Configuration).")
@click.option("--header-timeout", default=30.0, show_default=True, type=FiniteFloatRange(min=0, min_open=True),
              help="Seconds a connection may take to send a request's headers (an idle keep-alive one too).")
@click.option("--body-timeout", default=300.0, show_default=True, type=FiniteFloatRange(min=0, min_open=True),
              help="Seconds a request's body may take to arrive (then 408).")
@click.option("--max-connections", default=None, type=click.IntRange(min=1),
              help="Open connections at most (default 1000, fewer under a lower open-files limit); at the cap "
                   "a new one closes the connection that has waited longest for headers.")
@click.option("--access-log/--no-access-log", default=False, show_default=True,
              help="Log one line per request (request line, status, size, time; never headers, bodies or "
                   "query strings).")
@click.option("--video-num-frames", default=32, show_default=True, type=click.IntRange(min=1),
              help="Frames kept of a video_url clip, evenly spaced (vLLM's --media-io-kwargs "
                   "'{\"video\": {\"num_frames\": N}}'); they reach the engine as images.")
@click.option("--allowed-local-media-path", type=CliPath(exists=True, file_okay=False), default=None,
              help="Folder whose files video_url parts may name as file:// URLs (as vLLM's option); "
                   "without it file:// URLs are refused.")
@click.option("--video-decode-timeout", default=60.0, show_default=True,
              type=FiniteFloatRange(min=0, min_open=True),
              help="Seconds a video_url clip's frames may take to decode; a slower clip is a 400.")
def serve(
    model: str,
    engine_name: str,
    rules: str | None,
    revision: str | None,
    host: str,
    port: int,
    served_model_name: str | None,
    api_key: str | None,
    max_batch_size: int,
    max_model_len: int,
    device: str,
    hf_config: tuple[str, ...],
    header_timeout: float,
    body_timeout: float,
    max_connections: int | None,
    access_log: bool,
    video_num_frames: int,
    allowed_local_media_path: str | None,
    video_decode_timeout: float,
) -> None:
    """Serve a model on an OpenAI-compatible API (/v1/models, /v1/chat/completions, /health).

    Accepts the vLLM fields the protocol uses (continue_final_message, add_generation_prompt,
    logprobs, top_logprobs up to 20) and batches concurrent requests. The scripted engine answers
    from a rules file and is labelled "scripted" in the served model id; the reference engine is a
    deterministic rule-based program (site page "The demo"), labelled "reference:" in the served
    model id.

    \b
    Example:
      benchcheck serve --model models/tiny --port 8001
      benchcheck serve --engine reference --model rules --port 8002
    """
    from benchcheck.cli.common import die
    from benchcheck.engines.capabilities import concurrent_calls
    from benchcheck.engines.options import EngineOptionError, EngineOptions
    from benchcheck.engines.registry import from_options
    from benchcheck.launch.servers import SERVE_TAG_ENV
    from benchcheck.serve.app import check_host, run_server
    from benchcheck.serve.guard import Guard, default_max_connections
    from benchcheck.serve.media import MediaOptions

    try:
        check_host(host)  # before a model is loaded
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--host'") from None
    if api_key is not None and not api_key.strip():
        # An unset shell variable (``--api-key "$KEY"``) would serve every /v1 route without a key.
        raise click.BadParameter("the API key is empty, which would serve without one: give a key, or leave "
                                 "--api-key out to serve without one deliberately", param_hint="'--api-key'")
    try:
        media = MediaOptions.make(video_num_frames, allowed_local_media_path, video_decode_timeout)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--allowed-local-media-path'") from None
    opts = EngineOptions(model=model, revision=revision, device=device, rules=rules, max_batch_size=max_batch_size,
                         served_name=served_model_name or model,
                         max_model_len=max_model_len, hf_config=hf_config)
    try:
        engine = from_options(engine_name, opts)
    except EngineOptionError as e:
        die(str(e))
    except (OSError, ValueError) as e:
        die(f"cannot load model {model}: {e}")
    inflight = concurrent_calls(engine)
    guard = Guard(header_timeout, body_timeout, max_connections or default_max_connections())
    try:
        stopped_by = run_server(engine, served_model_name or model, host, port, api_key, max_batch_size, inflight,
                                access_log, guard, media, os.environ.get(SERVE_TAG_ENV))
    except OSError as e:  # the port is taken, or the host is not an interface of this machine
        die(f"cannot serve on {host}:{port}: {e}")
    # Ctrl-C: one line and 130, as every command. SIGTERM (how launch, systemd and `docker stop`
    # end a server) is a stop asked for: exit 0, as before.
    if stopped_by == signal.SIGINT:
        click.echo("serve: stopped by Ctrl-C", err=True)
        raise SystemExit(130)


COMMANDS = [serve]
