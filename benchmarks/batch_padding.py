"""Padding tokens in the ``hf`` engine's right-padded scoring batches, on gpu_screen's requests (CPU).

The requests of gpu_screen's one-frame (image1) and 32-frame (video32) workloads are encoded with
the random models' tokenizer and image processor (the true Qwen3-VL token counts) and batched as
the engine batches them (``hf_batch.chunk_spans`` in arrival order, each chunk sorted and cut by
``plan_batches``; the first chunk and growth of an ``HFEngine``), and, for comparison, as if the
whole call were sorted at once. The padding share is what an unpadded layout
(``HFEngine.unpadded_scoring``) would save of the language model's tokens.

Run:  PYTHONPATH=src python benchmarks/batch_padding.py
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcheck.engines.hf.inputs.encoder import PromptEncoder
from benchcheck.engines.hf.schedule.batches import chunk_spans, plan_batches
from benchcheck.engines.hf.schedule.pipeline import Job, Plan, first_chunk
from benchcheck.engines.transformers_lib import transformers_module
from benchcheck.testing.random_weights import PREPROCESSOR_CONFIG
from benchcheck.testing.tokenizer import QWEN_FIRST_SPECIAL_ID, write_tokenizer
from engine_throughput import jpeg
from gpu_screen import synthetic_items, visual


def padding(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Padding tokens over real ones in these batches (indices into ``lengths``)."""
    pad = sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)
    return pad / sum(lengths)


def engine_batches(lengths: Sequence[int], with_images: bool, plan: Plan) -> list[list[int]]:
    """The batches the engine plans for one call of these requests (``hf_pipeline``'s rule)."""
    jobs = [Job(str(i), "", (b"",) if with_images else (), None, None, 1) for i in range(len(lengths))]
    out: list[list[int]] = []
    window = plan.sort_window or (2 if with_images else 8) * plan.max_batch_size
    for lo, hi in chunk_spans(len(lengths), first_chunk(jobs, plan), plan.chunk_growth, lambda _: window):
        out += [[lo + j for j in b] for b in plan_batches(lengths[lo:hi], plan.max_batch_size, plan.max_batch_tokens)]
    return out


def true_encoder() -> tuple[PromptEncoder, int]:
    """The random models' prompt encoder (their tokenizer and image processor: the true Qwen3-VL
    token counts), and the id of their first special token."""
    folder = Path(tempfile.mkdtemp())
    first = write_tokenizer(folder, first_special_id=QWEN_FIRST_SPECIAL_ID)
    tokenizer = transformers_module().AutoTokenizer.from_pretrained(folder)
    image = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    return PromptEncoder(tokenizer, dict(PREPROCESSOR_CONFIG), image), first


def main() -> None:
    encoder, _ = true_encoder()
    frames = [jpeg(s) for s in range(64)]
    plan = Plan(max_batch_size=256, max_batch_tokens=65536)  # HFEngine's defaults
    print("| workload | requests | prompt tokens min / mean / max | batches | largest | padding |")
    print("|---|---:|---|---|---:|---:|")
    for name, reqs in {"image1": visual(synthetic_items(384, 30, 2), 2, frames, 32),
                       "video32": visual(synthetic_items(96, 30, 4), 3, frames, 32)}.items():
        lengths = [encoder.encode(r.prompt, r.images, r.assistant_prefix).n_tokens for r in reqs]
        spread = f"{min(lengths)} / {np.mean(lengths):.1f} / {max(lengths)}"
        ours = engine_batches(lengths, True, plan)
        at_once = plan_batches(lengths, plan.max_batch_size, plan.max_batch_tokens)
        for how, batches in (("the engine's (chunks)", ours), ("all sorted at once", at_once)):
            print(f"| {name} | {len(reqs)} | {spread} | {how}: {len(batches)} | {max(map(len, batches))} | "
                  f"{padding(lengths, batches):.2%} |")

if __name__ == "__main__":
    main()
