"""Where the ``hf`` engine's launching thread would wait for the device, on the CPU.

``benchmarks.shared.device_reads`` traces which tensors would live on the device and records each
read of one (``.item()``, ``.tolist()``, boolean indexing, ``nonzero`` ...) with its phase and site.
This runs the engine's calls the mix and the screen make, on the tiny model on the CPU with the
ops the engine runs on CUDA by default (``varlen``, ``vision_block``), once per configuration,
and prints the reads per phase and site, and the operations dispatched per phase (each launches
at most a few kernels on CUDA: the host's launches of the call):

- ``sweep``: a generation call of unequal rows with images (a right-padded prefill) and a few
  decode steps;
- ``video``: a scoring call of requests with several frames each;
- ``blind``: a scoring call without images.

The decode loop's reads of finished rows are the engine's own, made on purpose (its look-back,
decision 103; on the CPU the look-back is 0, so every step reads); the prefill's are the ones that
leave a short prefill launch-bound.

    PYTHONPATH=src:. python -m benchmarks.device_reads [--depth-of qwen3-vl-8b] [--config "ops=..." ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from benchcheck.engines.base import GenerateRequest, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchmarks.shared.device_reads import Tracer, table, tracing

# The ops the engine runs by default on CUDA but not on the CPU (their "cuda" default).
CUDA_DEFAULTS = "ops=+varlen,+vision_block"


def jpeg(seed: int, w: int, h: int) -> bytes:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // 8), max(1, w // 8), 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR).save(buf, "JPEG", quality=85)
    return buf.getvalue()


@dataclass(frozen=True, slots=True)
class Workload:
    """One call the engine is asked: generation (``generate``) or scoring."""

    name: str
    generate: tuple[GenerateRequest, ...] = ()
    score: tuple[ScoreRequest, ...] = ()

    def call(self, engine: HFEngine) -> list[object]:
        """The call's answers: texts of a generation, top log-probs of scoring."""
        if self.generate:
            return [getattr(g, "text", g) for g in engine.generate_sync(list(self.generate))]
        return [getattr(s, "top", s) for s in engine.score_sync(list(self.score))]


def workloads() -> list[Workload]:
    frames = [jpeg(k, 96, 64) for k in range(6)]
    return [
        Workload("sweep", generate=tuple(GenerateRequest(f"g{i}", "What happens in the clip?" + " Watch." * (3 * i),
                                                         tuple(frames[: 2 + 2 * i]), max_tokens=4) for i in range(2))),
        Workload("video", score=tuple(ScoreRequest(f"v{i}", f"Which one? A. up B. down {i}" + " Think." * i,
                                                   tuple(frames[i: i + 4])) for i in range(3))),
        Workload("blind", score=tuple(ScoreRequest(f"b{i}", f"Which one? A. up B. down C. left {i}" + " Now." * i)
                                      for i in range(4))),
    ]


def tiny_model(folder: Path, depth_of: str) -> Path:
    """The tiny model, or one of its widths at the depth of ``depth_of`` (a ``SHAPES`` name)."""
    import dataclasses

    from benchcheck.testing import SHAPES, build_tiny_model
    from benchcheck.testing.tiny import TINY

    if not depth_of:
        return build_tiny_model(folder, seed=0)
    if depth_of not in SHAPES:
        raise SystemExit(f"--depth-of {depth_of}: choose from {', '.join(SHAPES)}")
    real = SHAPES[depth_of]
    shape = dataclasses.replace(TINY, layers=real.layers, vision_depth=real.vision_depth, deepstack=real.deepstack)
    return build_tiny_model(folder, seed=0, shape=shape)


def run(model_dir: Path, configs: list[str]) -> list[dict[str, Any]]:
    from benchcheck.engines.hf.config import HFConfig

    rows: list[dict[str, Any]] = []
    for spec in configs:
        engine = HFEngine(model_dir, device="cpu", config=HFConfig.parse([CUDA_DEFAULTS, *spec.split()]))
        engine.stop_ids = set()  # every row runs its steps
        for work in workloads():
            work.call(engine)  # the engine's caches filled, as in a running mix: what remains is per call
            with tracing(engine.model) as tracer:
                work.call(engine)
            rows += [{"config": spec or "default", "workload": work.name, "phase": phase, "site": site, "reads": n}
                     for phase, site, n in table(tracer)]
            rows.append({"config": spec or "default", "workload": work.name, "phase": "all", "site": "",
                         "reads": len(tracer.reads), "kinds": _kinds(tracer), "ops": dict(tracer.ops)})
    return rows


def _kinds(tracer: Tracer) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in tracer.reads:
        out[r.what] = out.get(r.what, 0) + 1
    return out


def lines(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| config | workload | phase | innermost site | reads |", "|---|---|---|---|---:|"]
    for r in rows:
        if r["phase"] == "all":
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items()))
            out.append(f"| {r['config']} | {r['workload']} | **all** | {kinds} | **{r['reads']}** |")
            ops = ", ".join(f"{k} {n}" for k, n in sorted(r["ops"].items()))
            out.append(f"| {r['config']} | {r['workload']} | operations | {ops} | |")
        else:
            out.append(f"| {r['config']} | {r['workload']} | {r['phase']} | `{r['site']}` | {r['reads']} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="a checkpoint folder (default: the tiny model, built)")
    ap.add_argument("--depth-of", default="", help="build the tiny model with this real model's layers, vision blocks "
                    "and DeepStack layers (qwen3-vl-8b, qwen3-vl-2b): its reads per forward, at tiny widths")
    ap.add_argument("--config", action="append", default=None,
                    help="a run's --hf-config pairs, space-separated (repeat for more runs; default: "
                         "ops=-visual_no_reads, then the engine's defaults)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.model is not None and a.depth_of:
        ap.error("--depth-of builds its own model: give it or --model, not both")
    configs = a.config if a.config is not None else ["ops=-visual_no_reads", ""]
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model
        if model is None:
            model = tiny_model(Path(tmp) / "tiny", a.depth_of)
        rows = run(model, configs)
    text = "\n".join(lines(rows))
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "device_reads.json").write_text(json.dumps(rows, indent=1))
        (a.out / "device_reads.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
