"""The screening and sweep workloads of the ``hf`` engine on one GPU, checked and timed in one run.

Workloads (random-weight true-shape Qwen3-VL models, bf16; ``--tiny``: the tiny model, CPU):
  blind      8B, step 1: 4 seeded option permutations per item (real request builder)
  image1     8B, step 2: the middle 448x256 frame + question
  video32    2B, step 3: 32 frames at 448x256 + question
  video32_8b 8B, step 6: 32 frames at 448x256
  sweep      8B, v_fps2_s224: 582 frames at 416x224 (about 54,000 prompt tokens), 128 greedy tokens
  e2e        2B, ``benchcheck screen --step 3`` from a JPEG frame cache vs the engine alone (gpu_e2e.py)
Rows per workload: ``naive`` (one request at a time, transformers' own forward: no engine
changes, full logits), ``ours`` (``HFEngine`` as a user gets it: everything chosen automatically),
and for blind also ``unshared`` (the same engine with prefix sharing off). Columns: items/s, the
limit (useful FLOPs at the bf16 matmul rate measured in this run; for shared rows the FLOPs of the
shared computation), ratio to it, ratio to the limit at the rate the same 8192^3 product sustains
for 3 s (``gemm_clock.sustained_peak``: the board at its power cap), peak device memory, the GPU
busy fraction (NVML's kernel time share, sampled every 20 ms; not measured without NVML), the
mean SM clock and board power over the row, and the time spent in Python's cyclic garbage
collector during it.

Correctness, every workload: the letters' log-probs (full softmax, letters A-E) of ours against
transformers' plain forward of each request alone; the tolerance is set from the noise floor
measured in the same run (the same plain forward at batch 1 and batched), and for prefix sharing
exactness is also checked in float32 (the 2B model cast to float32).

Run (GPU):  PYTHONPATH=src python3 benchmarks/gpu_screen.py --out $OUT
Run (CPU):  PYTHONPATH=src python benchmarks/gpu_screen.py --tiny
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcheck.engines.base import GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import collate, position_ids
from benchcheck.engines.hf.forward.packed import Family, pack, packed_logprobs
from benchcheck.engines.hf.forward.score import score_batch
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.families import packed_length, plan_families, worth_sharing
from benchcheck.engines.hf.schedule.pipeline import one_row
from benchcheck.items import Item, load_items
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec
from engine_throughput import WORDS, item_flops, jpeg, matmul_peak, sync
from gemm_clock import Nvml, Sample, sustained_peak

LETTERS = "ABCDE"


@dataclass
class Row:
    workload: str
    mode: str
    items: int
    seconds: float
    items_per_s: float
    limit_per_s: float
    ratio: float
    peak_gib: float
    busy: float
    prompt_tokens: float
    note: str = ""
    ratio_sustained: float = float("nan")  # ratio to the limit at the sustained matmul rate
    gc_ms: float = 0.0  # time in Python's cyclic garbage collector during the row (any thread)
    gc_max_ms: float = 0.0  # its longest pause
    mhz: float = float("nan")  # mean SM clock over the row (NVML)
    watts: float = float("nan")  # mean board power over the row (NVML)


@dataclass
class Check:
    workload: str
    n: int
    noise_floor: float  # max |letters' lp| difference: plain alone vs plain batched
    tolerance: float
    ours_vs_plain: float
    ok: bool
    dtype: str
    extra: dict[str, Any] = field(default_factory=dict)


# -- requests ----------------------------------------------------------------------------


def words(rng: np.random.Generator, n: int) -> str:
    return " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), n))


def synthetic_items(n: int, q_words: int, seed: int = 0) -> list[Item]:
    rng = np.random.default_rng(seed)
    return [Item(f"syn_{i}", "syn", words(rng, q_words) + "?", tuple(words(rng, 4) for _ in range(5)), 0)
            for i in range(n)]


def nextqa_like_csv(path: Path, n: int, seed: int = 1) -> Path:
    """A benchmark file in the NExT-QA CSV layout with questions and options of its usual length."""
    rng = np.random.default_rng(seed)
    subj = ["the boy in blue", "the lady", "the man with the hat", "the baby", "the dog", "the girl in pink"]
    verbs = ["pick up the toy", "turn around", "walk to the sofa", "laugh", "look at the camera", "stand up"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
                    "a0", "a1", "a2", "a3", "a4"])
        for i in range(n):
            s, v = subj[i % len(subj)], verbs[(i * 7) % len(verbs)]
            q = f"why did {s} {v} after {subj[(i + 2) % len(subj)]} {verbs[(i + 3) % len(verbs)]}"
            opts = [f"{rng.choice(['to', 'because', 'so that'])} {words(rng, int(rng.integers(3, 8)))}"
                    for _ in range(5)]
            w.writerow([1000 + i, 900, 640, 360, q, int(rng.integers(0, 5)), i, "CW", *opts])
    return path


def step1(items: Sequence[Item]) -> list[ScoreRequest]:
    return [r for it in items for r in build_item_requests(default_run_spec(1), it).requests]


def visual(items: Sequence[Item], step: int, frames: Sequence[bytes], n_frames: int = 32,
           per_video: int = 1) -> list[ScoreRequest]:
    """The step's requests, ``per_video`` consecutive items asking about one video. Each video's
    frames are its own as a whole: its grid an order of the shared JPEGs that no other video has
    (single JPEGs recur across videos), and for step 2, which shows the grid's middle frame, a
    middle frame of its own; so requests of different videos never hold equal frames (the engine
    shares a prefix only over equal frames; real benchmarks ask 2-10 questions a video:
    ``--per-video``)."""
    out: list[ScoreRequest] = []
    mids: dict[int, bytes] = {}
    for i, it in enumerate(items):
        v = i // per_video
        pick = np.random.default_rng(v).choice(len(frames), n_frames, replace=len(frames) < n_frames)
        grid = [frames[int(j)] for j in pick]
        if step == 2:
            if v not in mids:
                mids[v] = jpeg(100_000 + v)
            grid[n_frames // 2] = mids[v]
        out += build_item_requests(default_run_spec(step), replace(it, video_id=f"vid{v}"), grid).requests
    return out


# -- measuring -----------------------------------------------------------------------------


class Busy:
    """GPU busy fraction over a block, from NVML utilization samples every 20 ms, with the SM
    clock (MHz) and the board's power (W) of the same samples (all nan without NVML). The clock
    matters: under a long run of products the H200 holds its clock below the one of
    gpu_screen's short peak product (power cap), which is why items/s follow the host
    (``benchmarks/gemm_clock.py``, whose sampler this is)."""

    def __init__(self, engine: HFEngine) -> None:
        self.nvml = Nvml() if engine.device.type == "cuda" else None
        self.samples: list[Sample] = []

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        if self.nvml is None:
            yield
            return
        with self.nvml.sampling(0.02) as self.samples:
            yield

    def mean(self, field_: str) -> float:
        return float(np.mean([getattr(s, field_) for s in self.samples])) if self.samples else float("nan")

    def fraction(self) -> float:
        return self.mean("busy") / 100


# The matmul rate a long run holds over the short peak's (one number a run, set in main; nan on
# the CPU): under back-to-back products the H200 sits at its power cap, ~85 % of the peak's clock.
SUSTAINED = [float("nan")]
PROFILE: dict[str, Path] = {}  # workload -> folder for a torch profile of one call (--profile)
VARIANTS: set[str] = set()  # variant rows of the visual workloads (--variants)


def profile(name: str, fn: Callable[[], object]) -> None:
    """Where one call spends its time: torch profiler tables (device and host), if asked for."""
    if name not in PROFILE:
        return
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch_profile(activities=acts, record_shapes=True) as prof:
        fn()
        sync()
    avg = prof.key_averages()
    key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    text = avg.table(sort_by=key, row_limit=30) + "\n" + avg.table(sort_by="cpu_time_total", row_limit=30)
    text += "\n" + prof.key_averages(group_by_input_shape=True).table(sort_by=key, row_limit=40)
    (PROFILE[name] / f"profile_{name}.txt").write_text(text)
    # The timeline too (chrome://tracing or Perfetto): where the device waits between kernels and
    # what the host was doing then, which the tables above cannot show.
    prof.export_chrome_trace(str(PROFILE[name] / f"trace_{name}.json.gz"))


def run_row(rows: list[Row], name: str, mode: str, engine: HFEngine, n: int, tokens: float, limit: float,
            fn: Callable[[], object], note: str = "") -> object:
    busy = Busy(engine)
    if engine.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    # Every row decodes its frames afresh: rows repeat the same requests, which the engine's
    # frame memo would otherwise serve from the rows before (a real pool asks each question once).
    engine.encoder.memo.clear()
    sync()
    with busy.measure(), gc_pauses() as pauses:
        t0 = time.perf_counter()
        res = fn()
        sync()
        dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30 if engine.device.type == "cuda" else float("nan")
    ratio = n / dt / limit if limit else float("nan")
    r = Row(name, mode, n, dt, n / dt, limit, ratio, peak, busy.fraction(), tokens, note, ratio / SUSTAINED[0],
            sum(pauses) * 1e3, max(pauses, default=0.0) * 1e3, busy.mean("mhz"), busy.mean("watts"))
    rows.append(r)
    print(f"  {name:10s} {mode:9s} {r.items_per_s:9.2f}/s  limit {limit:8.1f}  ratio {r.ratio:6.1%}  "
          f"peak {peak:6.1f} GiB  busy {r.busy:5.1%}  {r.mhz:5.0f} MHz {r.watts:4.0f} W  "
          f"gc {r.gc_ms:5.0f} ms ({len(pauses)}, longest {r.gc_max_ms:4.0f}) {note}", flush=True)
    return res


@contextlib.contextmanager
def gc_pauses() -> Iterator[list[float]]:
    """Seconds of each cyclic-GC collection (any thread) while the block runs: a collection holds
    Python's lock, so the engine's launching thread waits it out."""
    got: list[float] = []
    started: list[float] = []

    def hook(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            got.append(time.perf_counter() - started.pop())

    gc.callbacks.append(hook)
    try:
        yield got
    finally:
        gc.callbacks.remove(hook)


@contextlib.contextmanager
def plain(engine: HFEngine) -> Iterator[None]:
    """transformers' own model: every per-instance ``forward`` the engine installed removed."""
    saved = {m: vars(m).pop("forward") for m in engine.model.modules() if "forward" in vars(m)}
    with paced(engine, None):
        try:
            yield
        finally:
            for m, f in saved.items():
                m.forward = f


@contextlib.contextmanager
def paced(engine: HFEngine, depth: int | None) -> Iterator[None]:
    """The engine's launches paced at ``depth`` blocks ahead, or not paced (None)."""
    pacer = engine.pacer
    if pacer is None:
        yield
        return
    chosen = (pacer.enabled, pacer.depth)
    pacer.enabled, pacer.depth = depth is not None, depth or pacer.depth
    try:
        yield
    finally:
        pacer.enabled, pacer.depth = chosen


def engine_variant(engine: HFEngine, variant: str) -> tuple[contextlib.AbstractContextManager[None], str] | None:
    """The engine with one host-side knob changed, and its row's note; None for a name that is no
    such knob: launches not paced (the engine before hf_pacing) or paced at another depth
    (``nopace``, ``paceN``), chunks growing N times (``growN``), N encoding threads (``encN``),
    images decoded in N worker processes or, for 0, in the encoding threads (``decodeN``), a first
    chunk of N requests (``firstN``), batches of up to N tokens (``tokensN``)."""
    parsed = knob_of(variant)
    if parsed is None:
        return None
    knob, n = parsed
    if knob == "nopace":
        return paced(engine, None), "variant: launches not paced"
    if knob == "pace":
        return paced(engine, n), f"variant: launches paced {n} blocks ahead"
    if knob == "grow":
        return knob_set(engine, "chunk_growth", n), f"variant: chunks growing {n}x"
    if knob == "enc":
        return encode_threads(engine, n), f"variant: {n} encoding threads"
    if knob == "first":
        return knob_set(engine, "first_chunk", n), f"variant: a first chunk of {n} requests"
    if knob == "decode":
        where = f"in {n} worker processes" if n else "in the encoding threads"
        return knob_set(engine.encoder.decoder, "processes", n), f"variant: images decoded {where}"
    assert knob == "tokens"
    return knob_set(engine, "max_batch_tokens", n), f"variant: batches of up to {n} tokens"


KNOBS = ("pace", "grow", "enc", "first", "decode", "tokens")  # each takes a number: growN, ...


def knob_of(variant: str) -> tuple[str, int] | None:
    """(knob, N) of an engine-knob variant name (``nopace``: ("nopace", 0)); None for any other name."""
    if variant == "nopace":
        return variant, 0
    knob = variant.rstrip("0123456789")
    num = variant[len(knob):]
    return (knob, int(num)) if knob in KNOBS and num else None


def knob_row(w: Workload, variant: str) -> None:
    """A row for an engine knob variant (``engine_variant``)."""
    chosen = engine_variant(w.engine, variant)
    assert chosen is not None
    ctx, note = chosen
    with ctx:
        # Warm-up, a whole pass on CUDA as for the engine's own rows: a variant that changes
        # the batches' shapes would otherwise pay cuDNN's graph for each new one in its row.
        w.engine.score_sync(w.reqs if w.engine.device.type == "cuda" else w.reqs[: min(len(w.reqs), 16)])
        run_row(w.rows, w.name, f"ours-{variant}", w.engine, len(w.reqs), w.tokens, w.lim_shared,
                lambda: w.engine.score_sync(w.reqs), note=note)


@contextlib.contextmanager
def knob_set(owner: object, attr: str, value: object) -> Iterator[None]:
    """``owner.attr`` set to ``value`` for the block (an engine knob, a module switch)."""
    chosen = getattr(owner, attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        setattr(owner, attr, chosen)


@contextlib.contextmanager
def encode_threads(engine: HFEngine, n: int) -> Iterator[None]:
    engine.set_encode_threads(n)
    try:
        yield
    finally:
        engine.set_encode_threads(2)


def naive(engine: HFEngine, reqs: Sequence[ScoreRequest]) -> None:
    """One request at a time: encode, full forward (logits everywhere), top-20 of the last one."""
    for r in reqs:
        e = engine.encoder.encode(r.prompt, r.images, r.assistant_prefix)
        b = collate([e], engine.pad_id, engine.pixels, engine.dtype)
        with torch.inference_mode():
            logits = engine.model(**b.model_kwargs()).logits
            torch.topk(torch.log_softmax(logits[0, -1].float(), -1), 20).indices.cpu()


def flops_unshared(cfg: Any, prompts: Sequence[EncodedPrompt]) -> float:
    total = 0.0
    for p in prompts:
        grids = [tuple(int(x) for x in g) for g in (p.image_grid_thw if p.image_grid_thw is not None else [])]
        total += item_flops(cfg, p.n_tokens, grids)  # type: ignore[arg-type]
    return total


def flops_shared(cfg: Any, prompts: Sequence[EncodedPrompt], fams: Sequence[Family]) -> float:
    """Useful FLOPs when each family's prefix is computed once: linear layers per packed token;
    attention of the prefix (causal) and of each suffix over prefix + its own earlier tokens."""
    t = cfg.text_config
    q, kv = t.num_attention_heads * t.head_dim, t.num_key_value_heads * t.head_dim
    layer = t.hidden_size * (2 * q + 2 * kv) + 3 * t.hidden_size * t.intermediate_size
    total = 0.0
    for f in fams:
        first = prompts[f.members[0]]
        grids = [tuple(int(x) for x in g) for g in (first.image_grid_thw if first.image_grid_thw is not None else [])]
        vision = item_flops(cfg, 0, grids) - 2.0 * t.hidden_size * t.vocab_size  # type: ignore[arg-type]
        p = f.prefix
        pairs = p * (p + 1) / 2
        for m in f.members:
            s = prompts[m].n_tokens - p
            pairs += s * p + s * (s + 1) / 2
        total += vision + 2.0 * layer * t.num_hidden_layers * packed_length(prompts, f)
        total += 4.0 * q * t.num_hidden_layers * pairs + 2.0 * t.hidden_size * t.vocab_size * len(f.members)
    return total


def letter_ids(engine: HFEngine) -> list[int]:
    return [engine.tokenizer.convert_tokens_to_ids(c) for c in LETTERS]


@torch.inference_mode()
def plain_lps(engine: HFEngine, prompts: Sequence[EncodedPrompt], batch: int) -> torch.Tensor:
    """Letters' log-probs from transformers' own forward, ``batch`` requests per forward."""
    ids = letter_ids(engine)
    out = []
    with plain(engine):
        for i in range(0, len(prompts), batch):
            b = collate(prompts[i : i + batch], engine.pad_id, engine.pixels, engine.dtype)
            pos = position_ids(b)
            logits = engine.model(**b.model_kwargs(), position_ids=pos, logits_to_keep=1).logits
            out.append(torch.log_softmax(logits[:, -1].float(), -1)[:, ids].cpu())
    return torch.cat(out)


@torch.inference_mode()
def ours_lps(engine: HFEngine, prompts: Sequence[EncodedPrompt]) -> torch.Tensor:
    """Letters' log-probs from the engine's own path for these prompts (shared where it shares)."""
    fams = plan_families(prompts)
    varlen = engine.tree_attention == "varlen"  # the tree attention the engine picked
    if worth_sharing(fams) or one_row(prompts, engine.one_row_limit()):
        packed = pack(prompts, fams, engine.pad_id, engine.pixels, engine.dtype, one_row=varlen)
        lp = packed_logprobs(engine.model, packed, engine.scored_last_layer)
    else:
        b = collate(prompts, engine.pad_id, engine.pixels, engine.dtype, right=True)
        pend = score_batch(engine.model, b, 20, torch.tensor(letter_ids(engine)), engine.scored_last_layer)
        pend.wait()
        assert pend.gathered is not None
        return pend.gathered
    return lp[:, letter_ids(engine)].cpu()


@torch.inference_mode()
def plain_lp_exact(engine: HFEngine, prompts: Sequence[EncodedPrompt]) -> torch.Tensor:
    """(N, 5) lp_exact of letters A-E from transformers' plain forward, one request at a time:
    log-sum-exp of the full softmax over every variant of each letter."""
    from benchcheck.protocol import token_letter

    by_letter = [[i for i, t in zip(engine.letters.ids, engine.letters.texts, strict=True) if token_letter(t) == c]
                 for c in LETTERS]
    out = []
    with plain(engine):
        for p in prompts:
            b = collate([p], engine.pad_id, engine.pixels, engine.dtype)
            pos = position_ids(b)
            logits = engine.model(**b.model_kwargs(), position_ids=pos, logits_to_keep=1).logits
            lp = torch.log_softmax(logits[0, -1].float(), -1).cpu()
            out.append(torch.stack([torch.logsumexp(lp[ids], 0) for ids in by_letter]))
    return torch.stack(out)


def engine_lp_exact(engine: HFEngine, reqs: Sequence[ScoreRequest]) -> torch.Tensor:
    """(N, 5) lp_exact of letters A-E as the screen rows get it: ``score_sync``'s exact entries
    merged by the protocol's letter rule."""
    from benchcheck.protocol import letter_logprobs

    out = []
    for r in engine.score_sync(reqs):
        assert isinstance(r, LetterScores), r
        lp, missing, _ = letter_logprobs(r.exact, len(LETTERS))
        assert not missing, missing
        out.append(torch.tensor(lp))
    return torch.stack(out)


def check(engine: HFEngine, name: str, prompts: Sequence[EncodedPrompt], batch: int,
          reqs: Sequence[ScoreRequest] | None = None) -> Check:
    alone = plain_lps(engine, prompts, 1)
    batched = plain_lps(engine, prompts, batch)
    ours = ours_lps(engine, prompts)
    noise = float((alone - batched).abs().max())
    diff = float((ours - alone).abs().max())
    # Ours may differ from the plain forward by what batching alone moves it, with headroom for
    # the sample size (a handful of requests), and never less than float32 rounding allows.
    tol = max(3 * noise, 1e-4 if engine.dtype == torch.float32 else 1e-3)
    extra: dict[str, Any] = {}
    ok = diff <= tol
    if reqs is not None:  # the engine end to end: its lp_exact against the plain full softmax
        exact = float((engine_lp_exact(engine, reqs) - plain_lp_exact(engine, prompts)).abs().max())
        extra["lp_exact_vs_plain"] = exact
        ok = ok and exact <= tol
    c = Check(name, len(prompts), noise, tol, diff, ok, str(engine.dtype).replace("torch.", ""), extra)
    print(f"  check {name:10s} {c.dtype}: ours-vs-plain {diff:.2e}, noise floor {noise:.2e}, tol {tol:.2e}, "
          f"engine lp_exact vs plain {extra.get('lp_exact_vs_plain', float('nan')):.2e}: "
          f"{'OK' if c.ok else 'FAIL'}", flush=True)
    return c


def split_stats(engine: HFEngine, reqs: Sequence[ScoreRequest]) -> dict[str, float]:
    """The real prefix/suffix split of step 1 on these requests."""
    prompts = [engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    fams = plan_families(prompts)
    full = sum(p.n_tokens for p in prompts)
    packed = sum(packed_length(prompts, f) for f in fams)
    shared = [f for f in fams if len(f.members) > 1]
    return {
        "requests": len(prompts),
        "families": len(fams),
        "mean_prompt_tokens": full / len(prompts),
        "mean_prefix_tokens": float(np.mean([f.prefix for f in shared])) if shared else 0.0,
        "mean_suffix_tokens": float(np.mean([prompts[m].n_tokens - f.prefix for f in shared for m in f.members]))
        if shared else 0.0,
        "packed_over_full_tokens": packed / full,
    }


# -- workloads -------------------------------------------------------------------------------


def scoring(rows: list[Row], checks: list[Check], name: str, engine: HFEngine, reqs: list[ScoreRequest],
            n_naive: int, n_check: int, peak: float, unshared: bool = False) -> None:
    cfg = engine.model.config
    prompts = [engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    tokens = float(np.mean([p.n_tokens for p in prompts]))
    lim_full = len(reqs) / (flops_unshared(cfg, prompts) / (peak * 1e12))
    fams = plan_families(prompts)
    lim_shared = len(reqs) / (flops_shared(cfg, prompts, fams) / (peak * 1e12))
    checks.append(check(engine, name, prompts[:n_check], min(8, n_check), reqs[:n_check]))
    if n_naive:
        with plain(engine):
            naive(engine, reqs[:2])
            run_row(rows, name, "naive", engine, n_naive, tokens, lim_full, lambda: naive(engine, reqs[:n_naive]))
    modes = [("unshared", False), ("ours", True)] if unshared else [("ours", True)]
    for k, (mode, share) in enumerate(modes):
        engine.share_prefixes = share
        # Warm-up: compiles, and on CUDA a whole first pass, so that the rows after it do not gain
        # from shapes the first row already paid for (cuDNN builds a graph per new batch shape).
        warm = len(reqs) if k == 0 and engine.device.type == "cuda" else min(len(reqs), 64)
        engine.score_sync(reqs[:warm])
        res = run_row(rows, name, mode, engine, len(reqs), tokens, lim_shared if share else lim_full,
                      lambda: engine.score_sync(reqs))
        bad = [x for x in res if not isinstance(x, LetterScores)]  # type: ignore[attr-defined]
        if bad:
            raise SystemExit(f"{name}: {len(bad)} failed requests, e.g. {bad[0]}")
    engine.share_prefixes = True
    w = Workload(rows, checks, name, engine, reqs, prompts[:n_check], tokens, lim_full, lim_shared, unshared)
    for v in sorted(VARIANTS):
        found = variant(v)
        assert found is not None  # names were checked at the start (main)
        if found.on in ("both", "blind" if unshared else "visual") and (engine.device.type == "cuda" or not found.cuda):
            found.run(w, v)
    if unshared and engine.device.type == "cuda" and engine.tree_attention == "mask":
        # Variant (what the engine chose before): the packed rows' masked attention on cuDNN's
        # kernel, which builds a graph per new shape, instead of the memory-efficient one.
        from benchcheck.engines.hf.attention import sdpa as hf_sdpa

        chosen = hf_sdpa.MASKED_KERNELS
        hf_sdpa.MASKED_KERNELS = ("CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
        try:
            run_row(rows, name, "ours-cudnn", engine, len(reqs), tokens, lim_shared, lambda: engine.score_sync(reqs),
                    note="variant: cuDNN attention for the tree mask")
        finally:
            hf_sdpa.MASKED_KERNELS = chosen
    if unshared and engine.device.type == "cuda":
        # The engine again after the variants: a row that runs second can gain from the first's warm-up.
        run_row(rows, name, "ours-again", engine, len(reqs), tokens, lim_shared, lambda: engine.score_sync(reqs),
                note="the engine as chosen, second pass")
    profile(name, lambda: engine.score_sync(reqs[: max(16, len(reqs) // 4)]))
    engine.share_prefixes = True


def alternating_rows(rows: list[Row], name: str, engine: HFEngine, reqs: list[ScoreRequest], tokens: float,
                     limit: float, mode: str, note: str, switch: Callable[[bool], None]) -> None:
    """A variant (``switch(True)``; ``switch(False)`` restores the engine's choice) timed twice,
    with the engine as chosen between (rows gain from running later: compare alternating rows;
    the caller's ``ours-again`` row comes after)."""
    try:
        switch(True)
        engine.score_sync(reqs[: min(len(reqs), 64)])  # warm-up: new shapes
        for k in (1, 2):
            switch(True)
            run_row(rows, name, mode + ("-again" if k > 1 else ""), engine, len(reqs), tokens, limit,
                    lambda: engine.score_sync(reqs), note=note)
            switch(False)
            if k == 1:
                run_row(rows, name, "ours-2", engine, len(reqs), tokens, limit, lambda: engine.score_sync(reqs),
                        note="the engine as chosen, between the variant's rows")
    finally:
        switch(False)


def tree_mask_variant(w: Workload, _: str) -> None:
    """The packed families' tree attention the other way (left-padded rows with a dense tree mask
    against one row with variable-length attention), timed, and the two paths' letters' log-probs
    compared directly (``direct_check``)."""
    engine = w.engine
    chosen = engine.tree_attention
    other = "mask" if chosen == "varlen" else "varlen"

    def switch(on: bool) -> None:
        engine.tree_attention = other if on else chosen

    alternating_rows(w.rows, w.name, engine, w.reqs, w.tokens, w.lim_shared, f"ours-{other}",
                     f"variant: tree attention by {other} (the engine: {chosen})", switch)
    direct_check(w, f"{chosen}_vs_{other}", switch)


def batch512_variant(w: Workload, _: str) -> None:
    """Up to 512 requests a batch instead of the engine's 256 (fewer, longer packed rows)."""
    engine = w.engine
    chosen = engine.max_batch_size

    def switch(on: bool) -> None:
        engine.max_batch_size = 2 * chosen if on else chosen

    alternating_rows(w.rows, w.name, engine, w.reqs, w.tokens, w.lim_shared, f"ours-bs{2 * chosen}",
                     f"variant: up to {2 * chosen} requests a batch (the engine: {chosen})", switch)


def vision_variant(w: Workload, variant: str) -> None:
    """The vision blocks fused (hf_vision_fused, off in the engine), with fc1's GELU epilogue
    (``vision-fused``) or without (``vision-fused-no-epilogue``): the two ways' letters' log-probs
    compared directly, then alternating rows."""
    from benchcheck.engines import hf_vision_fused

    engine = w.engine
    epilogue = variant == "vision-fused"

    def switch(on: bool) -> None:
        hf_vision_fused.GELU_EPILOGUE = epilogue if on else True
        hf_vision_fused.use_fused_vision_blocks(engine.model, enabled=on)

    direct_check(w, variant, switch)
    mode = "vfused" if epilogue else "vfused-noepi"
    note = "variant: vision blocks fused (add+LayerNorm" + (", GELU in fc1's epilogue)" if epilogue else ")")
    alternating_rows(w.rows, w.name, engine, w.reqs, w.tokens, w.lim_shared, mode, note, switch)


def gc_variant(w: Workload, _: str) -> None:
    """Python's cyclic collector scanning everything (``gc.unfreeze()``) against the engine's
    choice: what was alive after its first call frozen (``HFEngine.freeze_collector``, as vLLM
    freezes after start-up), or the other way round where the engine does not freeze."""
    frozen = w.engine.freeze_collector

    def switch(on: bool) -> None:
        if on == frozen:
            gc.unfreeze()
        else:
            gc.freeze()

    alternating_rows(w.rows, w.name, w.engine, w.reqs, w.tokens, w.lim_shared,
                     "ours-gc-thawed" if frozen else "ours-gc-frozen",
                     "variant: the collector scanning everything" if frozen else "variant: gc.freeze() before the row",
                     switch)


def nosync_variant(w: Workload, _: str) -> None:
    """The mask-free forward with no device reads inside it (hf_nosync) instead of transformers'
    own multimodal forward (placeholder check, masked scatter, DeepStack), or back."""
    from benchcheck.engines.hf.forward import score as hf_forward

    chosen_sync = hf_forward.NO_SYNC
    with knob_set(hf_forward, "NO_SYNC", not chosen_sync):
        w.engine.score_sync(w.reqs[: min(len(w.reqs), 16)])
        run_row(w.rows, w.name, "ours-nosync" if not chosen_sync else "ours-sync", w.engine, len(w.reqs), w.tokens,
                w.lim_full, lambda: w.engine.score_sync(w.reqs), note="variant: the other scoring forward (hf_nosync)")


def rotary_variant(w: Workload, _: str) -> None:
    """The vision rotary as before (transformers' function compiled, dynamic=True, on q/k views of
    the projection) instead of the engine's one-pass kernel (hf_vision_rotary), in alternating rows,
    then the engine as chosen once more."""
    from benchcheck.engines.hf.kernels.vision_rotary_triton import qkv_rotary
    from benchcheck.engines.hf.model.fused import compiled_vision_rotary
    from benchcheck.engines.hf.model.vision import use_grouped_vision_attention

    rows, name, engine, reqs, tokens, limit = w.rows, w.name, w.engine, w.reqs, w.tokens, w.lim_full
    old = compiled_vision_rotary()

    def switch(on: bool) -> None:
        if on:
            use_grouped_vision_attention(engine.model, rotary=old)
        else:
            use_grouped_vision_attention(engine.model, qkv_rotary=qkv_rotary)

    alternating_rows(rows, name, engine, reqs, tokens, limit, "ours-rotary-old",
                     "variant: vision rotary as before (compiled transformers' function on q/k views)", switch)
    run_row(rows, name, "ours-again", engine, len(reqs), tokens, limit, lambda: engine.score_sync(reqs),
            note="the engine as chosen (one-pass rotary), again")


def flipper(owner: object, attr: str) -> Callable[[bool], None]:
    """A switch for the flag ``owner.attr``: on, the other way than chosen now; off, as chosen."""
    chosen = bool(getattr(owner, attr))

    def switch(on: bool) -> None:
        setattr(owner, attr, (not chosen) if on else chosen)

    return switch


def flag_rows(w: Workload, owner: object, attr: str, modes: tuple[str, str], notes: tuple[str, str],
              check: str | None = None, limit: float | None = None) -> None:
    """Alternating rows with the engine as chosen and with the switch ``owner.attr`` the other
    way; ``modes``/``notes``: the variant row's name and note when the switch is chosen off, on.
    With ``check``, the two ways' letters' log-probs are first compared (``direct_check``).
    ``limit``: the rows' limit column, by default the computation the engine plans (shared
    prefixes computed once, as in the workload's own rows)."""
    if check is not None:
        direct_check(w, check, flipper(owner, attr))
    chosen = bool(getattr(owner, attr))
    alternating_rows(w.rows, w.name, w.engine, w.reqs, w.tokens, w.lim_shared if limit is None else limit,
                     modes[chosen], notes[chosen], flipper(owner, attr))


def unpadded_variant(w: Workload, _: str) -> None:
    """Batches that share nothing scored in the one row without padding (``unpadded_scoring``)."""
    what = f"for what shares nothing (tree attention: {w.engine.tree_attention})"
    flag_rows(w, w.engine, "unpadded_scoring", ("ours-unpadded", "ours-padded"),
              (f"variant: one row, no padding {what}", f"variant: right-padded rows {what}"))


def direct_check(w: Workload, label: str, switch: Callable[[bool], None]) -> None:
    """The letters' log-probs of the workload's check prompts with the engine as chosen and with
    ``switch(True)`` (``switch(False)`` restores it), compared directly (tolerance: 3x the noise
    floor of the workload's check); a check row named ``{workload}_{label}``."""
    engine = w.engine
    chosen = ours_lps(engine, w.prompts)
    switch(True)
    try:
        other = ours_lps(engine, w.prompts)
    finally:
        switch(False)
    direct_row(w, label, float((chosen - other).abs().max()))


def direct_row(w: Workload, label: str, diff: float, extra: dict[str, Any] | None = None, ok: bool = True,
               says: str = "") -> None:
    """A check row ``{workload}_{label}`` for a direct comparison's largest difference: the
    tolerance is 3x the noise floor of the workload's check (at least 1e-4 in float32, 1e-3
    otherwise); ``ok`` False fails it whatever the difference."""
    floor = next(c.noise_floor for c in reversed(w.checks) if c.workload == w.name)
    tol = max(3 * floor, 1e-4 if w.engine.dtype == torch.float32 else 1e-3)
    passed = ok and diff <= tol
    w.checks.append(Check(f"{w.name}_{label}", len(w.prompts), floor, tol, diff, passed,
                          str(w.engine.dtype).replace("torch.", ""), extra or {}))
    print(f"  check {label}: {diff:.2e} (tol {tol:.2e}){says}: {'OK' if passed else 'FAIL'}", flush=True)


def full_layer_variant(w: Workload, _: str) -> None:
    """The last decoder layer over every position instead of the scored ones only
    (``scored_last_layer``, hf_scored), and the two paths' letters' log-probs compared directly."""
    flag_rows(w, w.engine, "scored_last_layer", ("ours-scored-last", "ours-full-last"),
              ("variant: the last layer at the scored positions only",
               "variant: the last decoder layer over every position"), check="scored_vs_full_last_layer")


def residual_variant(w: Workload, _: str) -> None:
    """The MLP's residual added after the down projection's product instead of in its epilogue
    (``hf_fused.RESIDUAL_EPILOGUE``), and the two paths' letters' log-probs compared directly."""
    from benchcheck.engines.hf.model import fused as hf_fused

    flag_rows(w, hf_fused, "RESIDUAL_EPILOGUE", ("ours-res-epilogue", "ours-res-apart"),
              ("variant: the MLP's residual in the down projection's product",
               "variant: the down projection's product, then the residual added"), check="residual_in_product_vs_apart")


def memo_variant(w: Workload, _: str) -> None:
    """Every request decoding its own frames (``hf_frame_memo`` off: capacity 0) instead of one
    video's questions decoding them once; meaningful with ``--per-video`` above 1."""
    memo = w.engine.encoder.memo
    chosen = memo.capacity

    def switch(on: bool) -> None:
        memo.capacity = 0 if on else chosen

    alternating_rows(w.rows, w.name, w.engine, w.reqs, w.tokens, w.lim_shared, "ours-memo-off",
                     "variant: every request decodes its own frames", switch)


def silu_variant(w: Workload, _: str) -> None:
    """SiLU-times-up the other way than the engine's choice (``hf_fused.SILU_KERNEL``): compiled
    (torch.compile) or ``hf_silu``'s one-pass Triton kernel, and the two paths' letters' log-probs
    compared directly."""
    from benchcheck.engines.hf.model import fused as hf_fused

    flag_rows(w, hf_fused, "SILU_KERNEL", ("ours-silu-kernel", "ours-silu-compiled"),
              ("variant: SiLU-times-up as the one-pass Triton kernel",
               "variant: SiLU-times-up compiled"), check="silu_other_way")


def swiglu_variant(w: Workload, _: str) -> None:
    """The gate/up products the other way than the engine's choice (``hf_fused.SWIGLU_KERNEL``):
    cuBLAS and then SiLU-times-up, or ``hf_swiglu``'s one kernel with it in the products'
    epilogue, and the two paths' letters' log-probs compared directly."""
    from benchcheck.engines.hf.model import fused as hf_fused

    flag_rows(w, hf_fused, "SWIGLU_KERNEL", ("ours-swiglu-fused", "ours-swiglu-cublas"),
              ("variant: gate/up products with SiLU-times-up in their epilogue (one Triton kernel)",
               "variant: gate/up products through cuBLAS, then SiLU-times-up"), check="swiglu_other_way")


def flash_varlen_variant(w: Workload, _: str) -> None:
    """Packed rows' attention the other way than the engine's choice (``hf_varlen.TRITON_KERNEL``):
    FlashAttention-2's variable-length kernel, or ``hf_varlen_triton``'s where the keys are short,
    and the two paths' letters' log-probs compared directly."""
    from benchcheck.engines.hf.attention import varlen as hf_varlen

    flag_rows(w, hf_varlen, "TRITON_KERNEL", ("ours-triton-varlen", "ours-flash-varlen"),
              ("variant: short packed sequences through the Triton kernel",
               "variant: packed sequences through FlashAttention-2"), check="triton_vs_flash_varlen")


def frames_apart_variant(w: Workload, _: str) -> None:
    """One video's questions planned apart (``hf_prefix.SHARE_FRAMES`` off: families only as token
    ids happen to sort) instead of sharing their frames and prompt prefix; meaningful with
    ``--per-video`` above 1. Checked first: the check prompts' letters' log-probs as the engine
    shares them against each prompt scored alone (``SHARE_FRAMES`` off can still share among
    the few check prompts, so it is no reference)."""
    from benchcheck.engines.hf.schedule import families as hf_prefix

    frames_check(w)
    flag_rows(w, hf_prefix, "SHARE_FRAMES", ("ours-frames-shared", "ours-frames-apart"),
              ("variant: one video's questions share its frames and prompt prefix",
               "variant: one video's questions each with its own frames"), limit=w.lim_full)


def frames_check(w: Workload) -> None:
    """The check prompts scored together (one video's questions sharing its frames) against each
    alone; a check row ``{workload}_frames_shared_vs_alone`` that names how many requests shared."""
    engine = w.engine
    fams = plan_families(w.prompts)
    sharing = sum(len(f.members) for f in fams if len(f.members) > 1)
    together = ours_lps(engine, w.prompts)
    alone = torch.cat([ours_lps(engine, [p]) for p in w.prompts])
    # A check in which nothing shares would prove nothing: it fails.
    direct_row(w, "frames_shared_vs_alone", float((together - alone).abs().max()), {"requests_sharing": sharing},
               ok=sharing > 0, says=f", {sharing} of {len(w.prompts)} requests in sharing families")


def pipe_variant(w: Workload, _: str) -> None:
    """Decoded frames handed back through the worker pool's pipe or in shared memory
    (``FrameDecoder.shared``)."""
    flag_rows(w, w.engine.encoder.decoder, "shared", ("ours-shm", "ours-pipe"),
              ("variant: decoded frames handed back in shared memory",
               "variant: decoded frames handed back through the pipe"))


@dataclass
class Workload:
    """What a variant's rows need of the scoring workload they run in."""

    rows: list[Row]
    checks: list[Check]
    name: str
    engine: HFEngine
    reqs: list[ScoreRequest]
    prompts: Sequence[EncodedPrompt]  # the workload check's prompts
    tokens: float  # mean prompt tokens
    lim_full: float
    lim_shared: float
    blind: bool  # the blind workload (prefix sharing, an unshared row), not a visual one


@dataclass(frozen=True)
class Variant:
    """A kind of ``--variants`` row: on which workloads (``blind``, ``visual`` or ``both``), only
    on CUDA or also on the CPU (``--tiny``), and what adds its rows (given the name asked for)."""

    on: Literal["blind", "visual", "both"]
    cuda: bool
    run: Callable[[Workload, str], None]


SPECIAL_VARIANTS = {
    "nosync": Variant("visual", True, nosync_variant),
    "gc-freeze": Variant("both", False, gc_variant),
    "vision-fused": Variant("visual", True, vision_variant),
    "vision-fused-no-epilogue": Variant("visual", True, vision_variant),
    "vision-rotary-old": Variant("visual", True, rotary_variant),
    "unpadded": Variant("visual", True, unpadded_variant),
    "pipe": Variant("visual", True, pipe_variant),
    "frames-apart": Variant("visual", False, frames_apart_variant),
    "fulllayer": Variant("both", False, full_layer_variant),
    "residual-apart": Variant("both", True, residual_variant),
    "silu": Variant("both", True, silu_variant),
    "swiglu": Variant("both", True, swiglu_variant),
    "flash-varlen": Variant("both", True, flash_varlen_variant),
    "memo-off": Variant("visual", False, memo_variant),
    "tree-mask": Variant("blind", False, tree_mask_variant),
    "batch512": Variant("blind", False, batch512_variant),
}


E2E_VARIANTS = ("ray",)  # rows of the e2e workload: ``benchcheck screen --executor ray`` as well


def variant(name: str) -> Variant | None:
    """The variant ``--variants`` names: a special one, or an engine knob (``knob_of``: every
    workload, on CUDA); None for a name that is neither."""
    if name in SPECIAL_VARIANTS:
        return SPECIAL_VARIANTS[name]
    return Variant("both", True, knob_row) if knob_of(name) is not None else None


def sweep(rows: list[Row], checks: list[Check], name: str, engine: HFEngine, n_items: int, n_frames: int,
          peak: float, size: tuple[int, int]) -> None:
    """Generation at the sweep's longest condition: ``naive`` (transformers' ``generate`` on one
    request: its loop, a DynamicCache), ``ours`` (the engine as chosen: reserved cache, no reads in
    the loop) and ``ours-graphs`` / ``ours-eager`` (its decode steps the other way: replayed as a
    CUDA graph, or eagerly), and ``fixed-eager`` (the graphs' fixed-shape steps run eagerly).
    Check: the graph row's texts equal ``fixed-eager``'s (the same kernels; eager steps of a batch
    without padding append and attend on other kernels, so a random bf16 model may pick other
    tokens there), and a graph was really replayed; reported: how many leading characters of
    item 0 match ``naive``, for each decoding."""
    frames = [jpeg(1000 + s, *size) for s in range(16)]
    reqs = [GenerateRequest(f"g{i}", "Question: what happens in the video?\nAnswer in one sentence.",
                            tuple(frames[(i + k) % len(frames)] for k in range(n_frames)), max_tokens=128)
            for i in range(n_items)]
    p = engine.encoder.encode(reqs[0].prompt, reqs[0].images, None)
    grids = [tuple(int(x) for x in g) for g in p.image_grid_thw] if p.image_grid_thw is not None else []
    # Limit: the prefill's useful FLOPs plus 128 decode steps of the whole model (2 FLOPs per
    # weight and token) at the matmul rate; decode at batch 1 is bound by reading the weights.
    n_params = sum(x.numel() for x in engine.model.model.language_model.parameters())
    flops = item_flops(engine.model.config, p.n_tokens, grids) + 128 * 2.0 * n_params  # type: ignore[arg-type]
    limit = peak * 1e12 / flops
    stop = engine.stop_ids
    engine.stop_ids = set()  # random weights: generate all 128 tokens, as a real answer might
    graphs = engine.decode_graphs
    chosen = graphs.enabled
    counts: dict[str, tuple[int, int]] = {}  # row -> (graphs captured, captures failed) in it

    def counted(mode: str, fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            c0, f0 = graphs.captured, graphs.failed
            out = fn()
            counts[mode] = (graphs.captured - c0, graphs.failed - f0)
            return out
        return run

    try:
        # Warm-up of both paths (the first 54,000-token prefill of a shape pays for its kernels' set-up).
        with plain(engine):
            naive_generate(engine, p, 2)
        engine.generate_sync([replace(reqs[0], max_tokens=2)])
        with plain(engine):
            naive_tokens = run_row(rows, name, "naive", engine, 1, float(p.n_tokens), limit,
                                   lambda: naive_generate(engine, p, 128), note="transformers' generate, one request")
        res = run_row(rows, name, "ours", engine, n_items, float(p.n_tokens), limit,
                      counted("ours", lambda: engine.generate_sync(reqs)), note=f"{n_frames} frames, 128 new tokens")
        other = not chosen
        flipped_mode = "ours-graphs" if other else "ours-eager"
        with knob_set(graphs, "enabled", other):
            flipped = run_row(rows, name, flipped_mode, engine, n_items, float(p.n_tokens),
                              limit, counted(flipped_mode, lambda: engine.generate_sync(reqs)),
                              note=f"variant: decode steps {'replayed as a CUDA graph' if other else 'run eagerly'}"
                                   + ("" if engine.device.type == "cuda" else " (no CUDA: eagerly too)"))
        with knob_set(graphs, "enabled", False), knob_set(graphs, "fixed_steps", True):
            fixed = run_row(rows, name, "fixed-eager", engine, n_items, float(p.n_tokens), limit,
                            lambda: engine.generate_sync(reqs), note="check: the graphs' fixed-shape steps, eagerly")
        profile(name, lambda: engine.generate_sync(reqs[:1]))
    finally:
        engine.stop_ids = stop
    runs = {"ours": res, flipped_mode: flipped, "fixed-eager": fixed}
    texts: dict[str, list[str]] = {}
    for mode, out in runs.items():
        bad = [g for g in out if not isinstance(g, Generation)]  # type: ignore[attr-defined]
        if bad:
            raise SystemExit(f"{name} {mode}: {len(bad)} failed: {bad[0]}")
        texts[mode] = [g.text for g in out]  # type: ignore[attr-defined]
    rows[-3].note += f"; {np.mean([g.completion_tokens for g in res]):.0f} tokens generated"  # type: ignore[attr-defined]
    graph_row = "ours" if chosen else "ours-graphs"
    graph_texts = texts[graph_row]
    differ = sum(a != b for a, b in zip(graph_texts, texts["fixed-eager"], strict=True))
    naive_text = engine.tokenizer.decode(naive_tokens, skip_special_tokens=True)
    lead = {mode: next((i for i, (x, y) in enumerate(zip(t[0], naive_text, strict=False)) if x != y),
                       min(len(t[0]), len(naive_text))) for mode, t in texts.items()}
    # On CUDA the graph row must really have replayed graphs, every batch of it (one capture a
    # batch; a failed capture runs eagerly, and eager against eager would pass unseen).
    caps, fails = counts[graph_row]
    replayed = engine.device.type != "cuda" or (caps >= 1 and fails == 0)
    c = Check(name, n_items, float("nan"), 0.0, float(differ), differ == 0 and replayed,
              str(engine.dtype).replace("torch.", ""),
              {"graph_vs_fixed_eager_texts_differing": differ, "graph_row": graph_row, "graphs_captured": caps,
               "graph_failures": fails, "chars_equal_to_naive": lead, "naive_chars": len(naive_text)})
    checks.append(c)
    print(f"  check {name}: graphs ({graph_row}) vs the same steps eagerly, {differ} of {n_items} texts differ, "
          f"{caps} graphs captured in that row ({fails} failed); item 0's leading characters equal to transformers' "
          f"generate, of {len(naive_text)}: {lead} (naive suppresses end tokens, ours may emit them)", flush=True)


def naive_generate(engine: HFEngine, prompt: EncodedPrompt, n: int) -> list[int]:
    """transformers' own greedy ``generate`` on one request: exactly ``n`` new tokens."""
    b = collate([prompt], engine.pad_id, engine.pixels, engine.dtype)
    with torch.inference_mode():
        out = engine.model.generate(**b.model_kwargs(), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                    pad_token_id=engine.pad_id)
    return [int(t) for t in out[0, prompt.n_tokens:].tolist()]


def build(shape: str, tiny_dir: Path | None, device: torch.device) -> HFEngine:
    if tiny_dir is not None:
        return HFEngine(tiny_dir, device=str(device), served_name=f"tiny({shape})")
    from benchcheck.testing.random_weights import build_random_model

    t0 = time.perf_counter()
    built = build_random_model(shape, device=str(device))
    print(f"built {shape} in {time.perf_counter() - t0:.1f} s", flush=True)
    return HFEngine.from_model(built.model, built.tokenizer, built.preprocessor_config, name=shape)


def free(engine: HFEngine | None) -> None:
    del engine
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny model on the CPU (smoke run)")
    ap.add_argument("--only", default="blind,image1,video32_8b,sweep,video32,e2e", help="comma-separated workloads")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the item counts")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"), help="folder for gpu_screen.json")
    ap.add_argument("--blind-items", type=int, default=256, help="items of the blind workload (4 forwards each)")
    ap.add_argument("--per-video", type=int, default=1,
                    help="questions asked about each video in the visual workloads (1: every request its own "
                         "frames; the engine shares the frames and prompt prefix of one video's questions)")
    ap.add_argument("--profile", default="", help="comma-separated workloads to profile (one call each)")
    ap.add_argument("--variants", default="nosync",
                    help="comma-separated variant rows: nosync, vision-fused, vision-fused-no-epilogue, "
                         "vision-rotary-old, unpadded, pipe, frames-apart (visual workloads); tree-mask (blind: the "
                         "other tree attention), "
                         "batch512 (blind); nopace, paceN (launches paced N blocks ahead), growN (chunks growing N "
                         "times), fulllayer (the last layer over every position), residual-apart (the MLP's residual "
                         "added after the down projection, not in its product), silu (SiLU-times-up the other way: "
                         "Triton kernel or compiled), swiglu (the gate/up products the other way: one Triton kernel "
                         "with SiLU-times-up in their epilogue, or cuBLAS then SiLU-times-up), flash-varlen (packed "
                         "rows' attention the other way: "
                         "FlashAttention-2 or the Triton kernel), memo-off (visual: every request decodes its own "
                         "frames), encN (N encoding threads; every "
                         "workload), decodeN (images decoded in N worker "
                         "processes; decode0: in the encoding threads), firstN (a first chunk of N requests), "
                         "tokensN (batches of up to N tokens); ray (e2e: the same screen on --executor ray)")
    args = ap.parse_args()
    VARIANTS.update(v for v in args.variants.split(",") if v)
    unknown = sorted(v for v in VARIANTS if variant(v) is None and v not in E2E_VARIANTS)
    if unknown:
        raise SystemExit(f"--variants: no variant named {', '.join(unknown)} (see --help)")
    device = torch.device("cpu" if args.tiny else "cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    PROFILE.update({w: out for w in args.profile.split(",") if w})
    tiny_dir = None
    scale = args.scale * (0.1 if args.tiny else 1.0)
    if args.tiny:
        from benchcheck.testing import build_tiny_model

        tiny_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")

    def n(x: int) -> int:
        return max(2, int(x * scale))

    pv = max(1, args.per_video)

    peak = matmul_peak(device)
    print(f"matmul peak: {peak:.4g} TFLOP/s", flush=True)
    held: dict[str, Any] = {}
    if device.type == "cuda":
        held = sustained_peak()
        SUSTAINED[0] = held["tflops"] / peak
        print(f"matmul sustained: {held['tflops']:.4g} TFLOP/s at {held['mhz']:.0f} MHz, {held['watts']:.0f} W "
              f"({', '.join(held['reasons']) or 'no clock limit reported'})", flush=True)
    frames = [jpeg(s) for s in range(64)]
    only = set(args.only.split(","))
    rows: list[Row] = []
    checks: list[Check] = []
    splits: dict[str, dict[str, float]] = {}
    t_start = time.perf_counter()
    if only & {"blind", "image1", "video32_8b", "sweep"}:
        engine = build("qwen3-vl-8b", tiny_dir, device)
        tmp = Path(tempfile.mkdtemp())
        from benchcheck.demo.items import write_demo_items

        demo = load_items(write_demo_items(tmp / "demo").paths).items
        nextqa = load_items([nextqa_like_csv(tmp / "NExTLike.csv", 500)]).items
        splits["demo pool (step 1)"] = split_stats(engine, step1([it for it in demo if 2 <= len(it.options) <= 26]))
        splits["NExT-QA-like CSV (step 1)"] = split_stats(engine, step1(nextqa))
        blind_reqs = step1(synthetic_items(n(args.blind_items), 50))
        splits["blind workload"] = split_stats(engine, blind_reqs)
        for k, v in splits.items():
            print(f"  split {k}: {json.dumps({a: round(b, 3) for a, b in v.items()})}", flush=True)
        if "blind" in only:
            scoring(rows, checks, "blind", engine, blind_reqs, n(64), 32, peak, unshared=True)
        if "image1" in only:
            scoring(rows, checks, "image1", engine, visual(synthetic_items(n(384), 30, 2), 2, frames, 32, pv),
                    n(48), 8, peak)
        if "video32_8b" in only:
            scoring(rows, checks, "video32_8b", engine, visual(synthetic_items(n(48), 30, 3), 6, frames, 32, pv),
                    n(4), 4, peak)
        if "sweep" in only:
            sweep(rows, checks, "sweep", engine, 2 if args.tiny else 3, 16 if args.tiny else 582, peak, (416, 224))
        free(engine)
    if "video32" in only:
        engine = build("qwen3-vl-2b", tiny_dir, device)
        scoring(rows, checks, "video32", engine, visual(synthetic_items(n(96), 30, 4), 3, frames, 32, pv),
                n(12), 4, peak)
        # Exactness of prefix sharing in float32: the same model cast to float32, step-1 prompts.
        engine.model.float()
        engine.dtype = torch.float32
        reqs = step1(synthetic_items(8, 50, 5))
        prompts = [engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
        checks.append(check(engine, "blind_fp32", prompts, 8))
        free(engine)

    e2e: dict[str, Any] = {}
    if "e2e" in only:
        import gpu_e2e

        tmp = Path(tempfile.mkdtemp())
        folder = gpu_e2e.write_model(tmp, device, tiny_dir)
        cache, items = gpu_e2e.write_pool(tmp, n(288), frames)
        rate, n_req = gpu_e2e.engine_rate(folder, device, items, cache)
        try:
            one = gpu_e2e.screen_rate(folder, device, items, cache, tmp / "results1", n_req, ("--batch-items", "16"))
            e2e = gpu_e2e.screen_rate(folder, device, items, cache, tmp / "results", n_req)
        except SystemExit as e:  # keep every other result
            print(f"  e2e failed: {e}", flush=True)
            one, e2e = {"steady_items_per_s": float("nan")}, {"error": str(e), "steady_items_per_s": float("nan"),
                                                               "rows": 0, "wall_s": 0.0, "first_row_s": 0.0}
        e2e["engine_items_per_s"] = rate
        e2e["ratio"] = e2e["steady_items_per_s"] / rate
        e2e["calls16_items_per_s"] = one["steady_items_per_s"]
        if "ray" in VARIANTS:
            # Issue 18: the same step on the Ray executor (its CPU actors read the JPEGs and build
            # the requests, one engine actor holds the GPU), against the local runner above.
            try:
                ray = gpu_e2e.screen_rate(folder, device, items, cache, tmp / "results_ray", n_req,
                                          ("--executor", "ray"))
            except SystemExit as e:
                print(f"  e2e on Ray failed: {e}", flush=True)
                ray = {"steady_items_per_s": float("nan"), "wall_s": float("nan"), "error": str(e)}
            e2e["ray_items_per_s"], e2e["ray_wall_s"] = ray["steady_items_per_s"], ray["wall_s"]
            print(f"  e2e on Ray: {ray['steady_items_per_s']:.2f} items/s steady, wall {ray['wall_s']:.1f} s "
                  f"(local runner {e2e['steady_items_per_s']:.2f}, wall {e2e['wall_s']:.1f} s)", flush=True)
        print(f"  e2e: engine {rate:.2f} items/s, screen {e2e['steady_items_per_s']:.2f} items/s steady "
              f"({e2e['ratio']:.0%}; --batch-items 16: {one['steady_items_per_s']:.2f}), wall {e2e['wall_s']:.1f} s "
              f"for {n_req} items", flush=True)

    env = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "matmul_peak_tflops": peak,
        "matmul_sustained": held,
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": time.perf_counter() - t_start,
    }
    (out / "gpu_screen.json").write_text(json.dumps(
        {"env": env, "rows": [asdict(r) for r in rows], "checks": [asdict(c) for c in checks], "splits": splits,
         "e2e": e2e},
        indent=1))
    held_text = (f"; sustained {held['tflops']:.4g} TFLOP/s at {held['mhz']:.0f} MHz, {held['watts']:.0f} W"
                 if held else "")
    lines = [f"device: {env['device']}; torch {env['torch']}; matmul peak {peak:.4g} TFLOP/s{held_text}; {env['date']}",
             "", "| workload | mode | items | prompt tokens | items/s | limit/s | ratio | ratio (sustained) | peak GiB "
             "| GPU busy | MHz | W | GC ms | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r.workload} | {r.mode} | {r.items} | {r.prompt_tokens:.0f} | {r.items_per_s:.1f} | "
              f"{r.limit_per_s:.1f} | {r.ratio:.1%} | {r.ratio_sustained:.1%} | {r.peak_gib:.1f} | {r.busy:.0%} | "
              f"{r.mhz:.0f} | {r.watts:.0f} | {r.gc_ms:.0f} | "
              f"{r.note} |" for r in rows]
    lines += ["", "| check | dtype | n | noise floor | tolerance | ours vs plain | engine lp_exact vs plain | ok |",
              "|---|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {c.workload} | {c.dtype} | {c.n} | {c.noise_floor:.2e} | {c.tolerance:.2e} | {c.ours_vs_plain:.2e} | "
              f"{c.extra.get('lp_exact_vs_plain', float('nan')):.2e} | {'yes' if c.ok else 'NO'} |" for c in checks]
    lines += ["", "| pool | requests | mean prompt | mean prefix | mean suffix | packed/full tokens |",
              "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {k} | {v['requests']:.0f} | {v['mean_prompt_tokens']:.1f} | {v['mean_prefix_tokens']:.1f} | "
              f"{v['mean_suffix_tokens']:.1f} | {v['packed_over_full_tokens']:.3f} |" for k, v in splits.items()]
    if e2e:
        lines += ["", f"e2e (2B, step 3, {e2e['rows']} items from a JPEG frame cache): engine alone "
                  f"{e2e['engine_items_per_s']:.2f} items/s; `benchcheck screen` {e2e['steady_items_per_s']:.2f} "
                  f"items/s from first to last row ({e2e['ratio']:.0%}; with --batch-items 16, the old default: "
                  f"{e2e['calls16_items_per_s']:.2f}); wall {e2e['wall_s']:.1f} s including "
                  f"model load ({e2e['first_row_s']:.1f} s to the first row)"
                  + (f"; on --executor ray {e2e['ray_items_per_s']:.2f} items/s, wall {e2e['ray_wall_s']:.1f} s"
                     if "ray_items_per_s" in e2e else "")]
    (out / "gpu_screen.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not all(c.ok for c in checks):
        raise SystemExit("correctness check failed")


if __name__ == "__main__":
    main()
