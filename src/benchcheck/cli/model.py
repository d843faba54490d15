"""``benchcheck model tiny|random``: build test and benchmark models."""

from __future__ import annotations

import click

from benchcheck.cli.common import CliPath, die


@click.group("model")
def model() -> None:
    """Build random-weight Qwen3-VL models: a tiny checkpoint for tests, true shapes on a GPU."""


@model.command("tiny")
@click.option("--out", "out", required=True, type=CliPath(file_okay=False), help="Folder to write.")
# numpy's seed sequences take no negative seed: refused here, before a partial folder is written.
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Weights and letter prior seed.")
def tiny(out: str, seed: int) -> None:
    """Write a tiny random-weight Qwen3-VL checkpoint folder (a few MB, loads with from_pretrained).

    \b
    Example:
      benchcheck model tiny --out models/tiny --seed 0
    """
    from pathlib import Path

    from benchcheck.testing import build_tiny_model

    path = build_tiny_model(Path(out), seed=seed)
    size = sum(f.stat().st_size for f in path.iterdir())
    click.echo(f"wrote {path} ({size / 1e6:.2f} MB, seed {seed})")


@model.command("random")
@click.option("--shape", required=True, type=click.Choice(["qwen3-vl-8b", "qwen3-vl-2b"]), help="True shape.")
@click.option("--device", default="cuda", show_default=True, help="CUDA device to build on.")
def random(shape: str, device: str) -> None:
    """Build a random-weight model with a real Qwen3-VL shape on the GPU; report parameters and
    memory; run one scoring forward. Exits 2 without CUDA.

    \b
    Example:
      benchcheck model random --shape qwen3-vl-8b
    """
    import torch

    if not torch.cuda.is_available() or not device.startswith("cuda"):
        die("no CUDA device: random-weight true shapes are built directly on a GPU")
    import time

    from benchcheck.engines.base import LetterScores, ScoreRequest
    from benchcheck.engines.hf.engine import HFEngine
    from benchcheck.testing.random_weights import build_random_model

    t0 = time.perf_counter()
    built = build_random_model(shape, device=device)
    built_s = time.perf_counter() - t0
    engine = HFEngine.from_model(built.model, built.tokenizer, built.preprocessor_config, name=shape)
    req = ScoreRequest("probe", "Question: what happens?\nOptions:\nA. x\nB. y\nAnswer with the option letter only.")
    [res] = engine.score_sync([req])
    if not isinstance(res, LetterScores):
        die(f"scoring forward failed: {res}", code=1)
        return
    gib = torch.cuda.max_memory_allocated(device) / 2**30
    click.echo(
        f"{shape}: {built.parameters() / 1e9:.3f} B parameters, built in {built_s:.1f} s, "
        f"peak memory {gib:.1f} GiB; one forward of {res.prompt_tokens} tokens in {res.latency_s * 1e3:.1f} ms"
    )


COMMANDS = [model]
