"""The work the ``hf`` engine plans when one video's questions share its frames (CPU, exact counts).

gpu_screen's visual requests (step 2: one 448x256 frame; steps 3 and 6: 32 frames) are encoded
with the random models' tokenizer and image processor (the true Qwen3-VL token counts), N
questions to a video, listed video by video as ``benchcheck screen`` sends them
(``screen.task.call_order``), and planned as the engine plans one call: chunk by chunk in
arrival order (``hf_batch.chunk_spans`` with an ``HFEngine``'s first chunk and growth), the
families of each chunk by ``hf_prefix.plan_families``, with the frames' key (``SHARE_FRAMES``,
the engine's choice) and without it (families only where token ids happen to sort them). For
each: the language model's tokens, the images through the vision tower, and the useful FLOPs of
the true 8B / 2B shapes (gpu_screen's ``flops_shared``: linear layers per packed token, the tree
attention's pairs, the vision tower once per family) over those of every request run alone. At
the device efficiency of unshared rows, items/s scales by the FLOPs column's inverse. The host's
side: milliseconds of one core to encode a request (tokenize, decode and resize its frames,
positions), with the engine's frame memo (``hf_frame_memo``: one video's frames decoded once) and
without it.

Run:  PYTHONPATH=src python benchmarks/frame_sharing.py [--per-video 1,2,3,4,9]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_padding import true_encoder
from benchcheck.engines.hf.forward.packed import Family
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.inputs.frame_memo import CAPACITY, FrameMemo
from benchcheck.engines.hf.schedule import families as hf_prefix
from benchcheck.engines.hf.schedule.batches import chunk_spans
from benchcheck.engines.hf.schedule.families import packed_length, plan_families
from benchcheck.engines.hf.schedule.pipeline import Job, Plan, first_chunk
from benchcheck.engines.transformers_lib import transformers_module
from benchcheck.testing.config import SHAPES, config_dict
from benchcheck.testing.tiny import special_ids
from engine_throughput import jpeg
from gpu_screen import flops_shared, flops_unshared, synthetic_items, visual

WORKLOADS = {  # name: (model shape, step, items and their seed: gpu_screen's at --scale 1)
    "image1": ("qwen3-vl-8b", 2, 384, 2),
    "video32": ("qwen3-vl-2b", 3, 96, 4),
    "video32_8b": ("qwen3-vl-8b", 6, 48, 3),
}


def config(shape: str, first_special: int) -> Any:
    """The true shape's configuration (no weights), as ``build_random_model`` makes it."""
    ids = special_ids(first_special)
    return transformers_module().Qwen3VLConfig(**config_dict(SHAPES[shape], ids, eos_id=ids["im_end"],
                                                             pad_id=ids["endoftext"]))


def engine_families(prompts: Sequence[EncodedPrompt], plan: Plan) -> list[Family]:
    """The families the engine plans for one call of these prompts (``hf_pipeline``'s chunks)."""
    jobs = [Job(str(i), "", (b"",), None, None, 1) for i in range(len(prompts))]
    window = plan.sort_window or 2 * plan.max_batch_size
    out: list[Family] = []
    for lo, hi in chunk_spans(len(prompts), first_chunk(jobs, plan), plan.chunk_growth, lambda _: window):
        out += [Family(tuple(lo + m for m in f.members), f.prefix) for f in plan_families(prompts[lo:hi])]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-video", default="1,2,3,4,9", help="questions to a video, comma-separated")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    args = ap.parse_args()
    encoder, first = true_encoder()
    frames = [jpeg(s) for s in range(64)]
    plan = Plan(max_batch_size=256, max_batch_tokens=65536)  # HFEngine's defaults
    print("| workload | questions a video | requests | planned | LM tokens | images | FLOPs | families (members) |")
    print("|---|---:|---:|---|---:|---:|---:|---|")
    for name in args.only.split(","):
        shape, step, n_items, seed = WORKLOADS[name]
        cfg = config(shape, first)
        for pv in (int(x) for x in args.per_video.split(",")):
            reqs = visual(synthetic_items(n_items, 30, seed), step, frames, 32, pv)
            host = [float("inf"), float("inf")]
            for k in (0, 1, 0, 1):  # alternating, the best of two; a fresh memo each time
                encoder.memo = FrameMemo(CAPACITY if k == 0 else 0)
                t0 = time.perf_counter()
                prompts = [encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
                host[k] = min(host[k], 1e3 * (time.perf_counter() - t0) / len(reqs))
            full_tokens = sum(p.n_tokens for p in prompts)
            full_images = sum(len(p.frames) for p in prompts)
            full_flops = flops_unshared(cfg, prompts)
            for how, share in (("frames shared", True), ("apart", False)):
                hf_prefix.SHARE_FRAMES = share
                fams = engine_families(prompts, plan)
                tokens = sum(packed_length(prompts, f) for f in fams)
                images = sum(len(prompts[f.members[0]].frames) for f in fams)
                shared = [len(f.members) for f in fams if len(f.members) > 1]
                print(f"| {name} | {pv} | {len(reqs)} | {how} | {tokens / full_tokens:.3f} | "
                      f"{images / full_images:.3f} | {flops_shared(cfg, prompts, fams) / full_flops:.3f} | "
                      f"{len(shared)} ({sum(shared)}) | {host[0]:.1f} / {host[1]:.1f} |", flush=True)
            hf_prefix.SHARE_FRAMES = True


if __name__ == "__main__":
    main()
