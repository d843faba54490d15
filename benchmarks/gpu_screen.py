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

Run (GPU):  PYTHONPATH=src python3 -m benchmarks.gpu_screen --out $OUT
Run (CPU):  PYTHONPATH=src python -m benchmarks.gpu_screen --tiny
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from benchcheck.engines.base import GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import collate, position_ids
from benchcheck.engines.hf.forward.generate import MIN_REPLAYED_STEPS
from benchcheck.engines.hf.forward.packed import pack, packed_logprobs
from benchcheck.engines.hf.forward.score import score_batch
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.kernels import decode_split
from benchcheck.engines.hf.schedule.families import packed_length, plan_families, worth_sharing
from benchcheck.engines.hf.schedule.pipeline import one_row
from benchcheck.items import load_items
from benchmarks.gemm_clock import sustained_peak
from benchmarks.shared.answer_stop import answers_stop_after
from benchmarks.shared.device import copy_bandwidth, matmul_peak, sync
from benchmarks.shared.flops import flops_shared, flops_unshared, grids_of, item_flops
from benchmarks.shared.nvml import Busy
from benchmarks.shared.workloads import jpeg, nextqa_like_csv, step1, synthetic_items, visual

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
    gc_n: int = 0  # collections during the row
    mhz: float = float("nan")  # mean SM clock over the row (NVML)
    watts: float = float("nan")  # mean board power over the row (NVML)
    config_hash: str = ""  # HFConfig.hash of the engine that ran the row (naive: the model's engine)


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


# -- measuring -----------------------------------------------------------------------------


# The matmul rate a long run holds over the short peak's (one number a run, set in main; nan on
# the CPU): under back-to-back products the H200 sits at its power cap, ~85 % of the peak's clock.
SUSTAINED = [float("nan")]
BANDWIDTH = [float("nan")]  # bytes/s of a large device copy (set in main; nan on the CPU)
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
            fn: Callable[[], object], note: str = "", echo: bool = True) -> object:
    """Time ``fn`` as a row of ``n`` items against ``limit`` items a second; ``echo``: print its line
    now (a caller that sets the row's limit afterwards prints it then, ``row_line``)."""
    busy = Busy(engine.device)
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
            sum(pauses) * 1e3, max(pauses, default=0.0) * 1e3, len(pauses), busy.mean("mhz"), busy.mean("watts"),
            engine.config_hash)
    rows.append(r)
    if echo:
        row_line(r)
    return res


def row_line(r: Row) -> None:
    """The row's line, with seconds an item and the sustained ratio: a call cut short by its time
    limit, before the tables are written, still says what its finished rows measured."""
    print(f"  {r.workload:10s} {r.mode:9s} {r.items_per_s:9.2f}/s ({r.seconds / r.items:.3f} s an item)  "
          f"limit {r.limit_per_s:8.2f}  ratio {r.ratio:6.1%} (sustained {r.ratio_sustained:6.1%})  "
          f"peak {r.peak_gib:6.1f} GiB  busy {r.busy:5.1%}  {r.mhz:5.0f} MHz {r.watts:4.0f} W  "
          f"gc {r.gc_ms:5.0f} ms ({r.gc_n}, longest {r.gc_max_ms:4.0f}) {r.note}", flush=True)


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
    """transformers' own model: every per-instance ``forward`` the engine installed removed, and
    launches not paced (the pacer's hooks stay on the model: an engine whose config says so)."""
    saved = {m: vars(m).pop("forward") for m in engine.model.modules() if "forward" in vars(m)}
    try:
        with engine.with_config(engine.config.with_ops("-pacing")).active():
            yield
    finally:
        for m, f in saved.items():
            m.forward = f


def engine_variant(engine: HFEngine, variant: str) -> tuple[HFEngine, str] | None:
    """The engine with one host-side knob of its ``HFConfig`` changed, and its row's note; None for
    a name that is no such knob: launches not paced or paced at another depth (``nopace``,
    ``paceN``), chunks growing N times (``growN``), N encoding threads (``encN``), images decoded in
    N worker processes or, for 0, in the encoding threads (``decodeN``), a first chunk of N requests
    (``firstN``), batches of up to N tokens (``tokensN``)."""
    parsed = knob_of(variant)
    if parsed is None:
        return None
    knob, n = parsed
    cfg = engine.config
    if knob == "nopace":
        return engine.with_config(cfg.with_ops("-pacing")), "variant: launches not paced"
    if knob == "pace":  # pacing is off by default (decision 011): the variant turns it on at depth N
        return engine.with_config(replace(cfg.with_ops("+pacing"), pacing_depth=n)), \
            f"variant: launches paced {n} blocks ahead"
    field_, note = {
        "grow": ("chunk_growth", f"variant: chunks growing {n}x"),
        "enc": ("encode_threads", f"variant: {n} encoding threads"),
        "first": ("first_chunk", f"variant: a first chunk of {n} requests"),
        "decode": ("decode_processes",
                   f"variant: images decoded {f'in {n} worker processes' if n else 'in the encoding threads'}"),
        "tokens": ("max_batch_tokens", f"variant: batches of up to {n} tokens"),
    }[knob]
    changes: dict[str, Any] = {field_: n}
    return engine.with_config(replace(cfg, **changes)), note


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
    other, note = chosen
    # Warm-up, a whole pass on CUDA as for the engine's own rows: a variant that changes the
    # batches' shapes would otherwise pay cuDNN's graph for each new one in its row.
    other.score_sync(w.reqs if other.device.type == "cuda" else w.reqs[: min(len(w.reqs), 16)])
    run_row(w.rows, w.name, f"ours-{variant}", other, len(w.reqs), w.tokens, w.lim_shared,
            lambda: other.score_sync(w.reqs), note=note)


def naive(engine: HFEngine, reqs: Sequence[ScoreRequest]) -> None:
    """One request at a time: encode, full forward (logits everywhere), top-20 of the last one."""
    for r in reqs:
        e = engine.encoder.encode(r.prompt, r.images, r.assistant_prefix)
        b = collate([e], engine.pad_id, engine.pixels, engine.dtype)
        with torch.inference_mode():
            logits = engine.model(**b.model_kwargs()).logits
            torch.topk(torch.log_softmax(logits[0, -1].float(), -1), 20).indices.cpu()


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
    """Letters' log-probs from the engine's own path for these prompts (shared where it shares),
    under the engine's config (``HFEngine.active``)."""
    fams = plan_families(prompts, share_frames=engine.config.op("share_frames"))
    varlen = engine.tree_attention == "varlen"  # the tree attention the engine picked
    with engine.active():
        if worth_sharing(fams) or one_row(prompts, engine.one_row_limit()):
            packed = pack(prompts, fams, engine.pad_id, engine.pixels, engine.dtype, one_row=varlen,
                          **engine.plan_options())
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
    unshared_engine = engine.with_config(engine.config.with_ops("-share_prefixes"))
    modes = [("unshared", unshared_engine), ("ours", engine)] if unshared else [("ours", engine)]
    for k, (mode, eng) in enumerate(modes):
        # Warm-up: compiles, and on CUDA a whole first pass, so that the rows after it do not gain
        # from shapes the first row already paid for (cuDNN builds a graph per new batch shape).
        warm = len(reqs) if k == 0 and engine.device.type == "cuda" else min(len(reqs), 64)
        eng.score_sync(reqs[:warm])
        res = run_row(rows, name, mode, eng, len(reqs), tokens, lim_full if eng is unshared_engine else lim_shared,
                      lambda eng=eng: eng.score_sync(reqs))  # type: ignore[misc]
        bad = [x for x in res if not isinstance(x, LetterScores)]  # type: ignore[attr-defined]
        if bad:
            raise SystemExit(f"{name}: {len(bad)} failed requests, e.g. {bad[0]}")
    w = Workload(rows, checks, name, engine, reqs, prompts[:n_check], tokens, lim_full, lim_shared, unshared)
    for v in sorted(v for v in VARIANTS - set(E2E_VARIANTS) if not is_sweep_variant(v)):  # those run with theirs
        found = variant(v)
        assert found is not None  # names were checked at the start (main)
        if found.on in ("both", "blind" if unshared else "visual") and (engine.device.type == "cuda" or not found.cuda):
            found.run(w, v)
    if unshared and engine.device.type == "cuda":
        # The engine again after the variants: a row that runs second can gain from the first's warm-up.
        run_row(rows, name, "ours-again", engine, len(reqs), tokens, lim_shared, lambda: engine.score_sync(reqs),
                note="the engine as chosen, second pass")
    profile(name, lambda: engine.score_sync(reqs[: max(16, len(reqs) // 4)]))


def alternating_rows(w: Workload, other: HFEngine, mode: str, note: str, limit: float | None = None) -> None:
    """A variant (``other``: the workload's engine with another config) timed twice, with the
    engine as chosen between (rows gain from running later: compare alternating rows; the caller's
    ``ours-again`` row comes after). ``limit``: the rows' limit column, by default the computation
    the engine plans (shared prefixes computed once, as in the workload's own rows)."""
    lim = w.lim_shared if limit is None else limit
    other.score_sync(w.reqs[: min(len(w.reqs), 64)])  # warm-up: new shapes
    for k in (1, 2):
        run_row(w.rows, w.name, mode + ("-again" if k > 1 else ""), other, len(w.reqs), w.tokens, lim,
                lambda: other.score_sync(w.reqs), note=note)
        if k == 1:
            run_row(w.rows, w.name, "ours-2", w.engine, len(w.reqs), w.tokens, lim, lambda: w.engine.score_sync(w.reqs),
                    note="the engine as chosen, between the variant's rows")


def op_rows(w: Workload, op: str, modes: tuple[str, str], notes: tuple[str, str], check: str | None = None,
            limit: float | None = None) -> None:
    """Alternating rows with the engine as chosen and with the op ``op`` of its ``HFConfig`` the
    other way; ``modes``/``notes``: the variant row's name and note when the op is chosen off, on.
    With ``check``, the two ways' letters' log-probs are first compared (``direct_check``)."""
    chosen = w.engine.config.op(op, w.engine.device.type == "cuda")  # a "cuda" default is off elsewhere
    other = w.engine.with_config(w.engine.config.with_ops(("-" if chosen else "+") + op))
    if check is not None:
        direct_check(w, check, other)
    alternating_rows(w, other, modes[chosen], notes[chosen], limit)


def direct_check(w: Workload, label: str, other: HFEngine) -> None:
    """The letters' log-probs of the workload's check prompts with the engine as chosen and with
    ``other`` (another config), compared directly (tolerance: 3x the noise floor of the workload's
    check); a check row named ``{workload}_{label}``."""
    direct_row(w, label, float((ours_lps(w.engine, w.prompts) - ours_lps(other, w.prompts)).abs().max()))


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


def tree_mask_variant(w: Workload, _: str) -> None:
    """The packed families' tree attention the other way (left-padded rows with a dense tree mask
    against one row with variable-length attention: op ``varlen``), timed, and the two paths'
    letters' log-probs compared directly."""
    chosen = w.engine.tree_attention
    other = "mask" if chosen == "varlen" else "varlen"
    op_rows(w, "varlen", (f"ours-{other}", f"ours-{other}"),
            (f"variant: tree attention by {other} (the engine: {chosen})",) * 2, check=f"{chosen}_vs_{other}")


def batch512_variant(w: Workload, _: str) -> None:
    """Twice the engine's requests a batch (fewer, longer packed rows)."""
    n = 2 * w.engine.config.max_batch_size
    other = w.engine.with_config(replace(w.engine.config, max_batch_size=n))
    alternating_rows(w, other, f"ours-bs{n}", f"variant: up to {n} requests a batch (the engine: {n // 2})")


def gc_variant(w: Workload, _: str) -> None:
    """Python's cyclic collector scanning everything (``gc.unfreeze()``) against the engine's
    choice: what was alive after its first call frozen (op ``freeze_gc``, as vLLM freezes after
    start-up), or the other way round where the engine does not freeze."""
    frozen = w.engine.freeze_collector
    mode = "ours-gc-thawed" if frozen else "ours-gc-frozen"
    note = "variant: the collector scanning everything" if frozen else "variant: gc.freeze() before the row"
    for k in (1, 2):
        gc.unfreeze() if frozen else gc.freeze()
        try:
            run_row(w.rows, w.name, mode + ("-again" if k > 1 else ""), w.engine, len(w.reqs), w.tokens, w.lim_shared,
                    lambda: w.engine.score_sync(w.reqs), note=note)
        finally:
            gc.freeze() if frozen else gc.unfreeze()
        if k == 1:
            run_row(w.rows, w.name, "ours-2", w.engine, len(w.reqs), w.tokens, w.lim_shared,
                    lambda: w.engine.score_sync(w.reqs), note="the engine as chosen, between the variant's rows")


def unpadded_variant(w: Workload, _: str) -> None:
    """Batches that share nothing scored in the one row without padding (op ``unpadded``)."""
    what = f"for what shares nothing (tree attention: {w.engine.tree_attention})"
    op_rows(w, "unpadded", ("ours-unpadded", "ours-padded"),
            (f"variant: one row, no padding {what}", f"variant: right-padded rows {what}"))


def full_layer_variant(w: Workload, _: str) -> None:
    """The last decoder layer over every position instead of the scored ones only (op
    ``scored_last_layer``), and the two paths' letters' log-probs compared directly."""
    op_rows(w, "scored_last_layer", ("ours-scored-last", "ours-full-last"),
            ("variant: the last layer at the scored positions only",
             "variant: the last decoder layer over every position"), check="scored_vs_full_last_layer")


def residual_variant(w: Workload, _: str) -> None:
    """The MLP's residual added after the down projection's product instead of in its epilogue
    (op ``residual_epilogue``), and the two paths' letters' log-probs compared directly."""
    op_rows(w, "residual_epilogue", ("ours-res-epilogue", "ours-res-apart"),
            ("variant: the MLP's residual in the down projection's product",
             "variant: the down projection's product, then the residual added"), check="residual_in_product_vs_apart")


def memo_variant(w: Workload, _: str) -> None:
    """Every request decoding its own frames (``frame_memo_bytes`` 0) instead of one video's
    questions decoding them once; meaningful with ``--per-video`` above 1."""
    other = w.engine.with_config(replace(w.engine.config, frame_memo_bytes=0))
    alternating_rows(w, other, "ours-memo-off", "variant: every request decodes its own frames")


def silu_variant(w: Workload, _: str) -> None:
    """SiLU-times-up the other way than the engine's choice (op ``silu_kernel``): compiled
    (torch.compile) or the one-pass Triton kernel, and the two paths' letters' log-probs compared
    directly."""
    op_rows(w, "silu_kernel", ("ours-silu-kernel", "ours-silu-compiled"),
            ("variant: SiLU-times-up as the one-pass Triton kernel", "variant: SiLU-times-up compiled"),
            check="silu_other_way")


def swiglu_variant(w: Workload, _: str) -> None:
    """The gate/up products the other way than the engine's choice (op ``swiglu``): cuBLAS and then
    SiLU-times-up, or one Triton kernel with it in the products' epilogue, and the two paths'
    letters' log-probs compared directly."""
    op_rows(w, "swiglu", ("ours-swiglu-fused", "ours-swiglu-cublas"),
            ("variant: gate/up products with SiLU-times-up in their epilogue (one Triton kernel)",
             "variant: gate/up products through cuBLAS, then SiLU-times-up"), check="swiglu_other_way")


def vision_block_variant(w: Workload, _: str) -> None:
    """The vision blocks the other way than the engine's choice (op ``vision_block``): transformers'
    own block forward, or the fused one (norms compiled, fc1's bias and tanh GELU in its product's
    epilogue), and the two paths' letters' log-probs compared directly."""
    op_rows(w, "vision_block", ("ours-vision-block", "ours-vision-plain"),
            ("variant: vision blocks fused (norms compiled, GELU in fc1's epilogue)",
             "variant: transformers' own vision block forward"), check="vision_block_other_way")


def attention_residual_variant(w: Workload, _: str) -> None:
    """The text attention's residual the other way than the engine's choice (op
    ``attention_residual``): in the output projection's product or added after it, and the two
    ways' letters' log-probs compared directly."""
    op_rows(w, "attention_residual", ("ours-attention-residual-in", "ours-attention-residual-apart"),
            ("variant: the attention's residual in its output projection's product",
             "variant: the attention's residual added after its output projection"),
            check="attention_residual_other_way")


def vision_norm_variant(w: Workload, _: str) -> None:
    """The fused vision blocks' LayerNorms the other way than the engine's choice (op
    ``vision_norm_kernel``): the one-pass Triton kernel or the compiled functions, and the two
    ways' letters' log-probs compared directly."""
    op_rows(w, "vision_norm_kernel", ("ours-vision-norm-kernel", "ours-vision-norm-compiled"),
            ("variant: the vision LayerNorms as one Triton pass", "variant: the vision LayerNorms compiled"),
            check="vision_norm_other_way")


def vision_pow2_variant(w: Workload, _: str) -> None:
    """The vision tower's attention the other way than the engine's choice (op ``vision_pow2``):
    each run of equal images in power-of-two counts per call, or all at once, and the two ways'
    letters' log-probs compared directly."""
    op_rows(w, "vision_pow2", ("ours-vision-pow2", "ours-vision-whole"),
            ("variant: vision attention in power-of-two image counts per call",
             "variant: vision attention on each run of equal images at once"), check="vision_pow2_other_way")


def no_reads_variant(w: Workload, _: str) -> None:
    """The visual forward the other way than the engine's choice (op ``visual_no_reads``): without
    its device reads (the placeholder check, DeepStack's boolean indexing) or with them, and the
    two ways' letters' log-probs compared directly."""
    op_rows(w, "visual_no_reads", ("ours-no-reads", "ours-with-reads"),
            ("variant: the visual forward without device reads",
             "variant: transformers' placeholder check and DeepStack indexing"), check="no_reads_other_way")


def flash_varlen_variant(w: Workload, _: str) -> None:
    """Packed rows' attention the other way than the engine's choice (op ``varlen_triton``):
    FlashAttention-2's variable-length kernel, or the Triton kernel where the keys are short, and
    the two paths' letters' log-probs compared directly."""
    op_rows(w, "varlen_triton", ("ours-triton-varlen", "ours-flash-varlen"),
            ("variant: short packed sequences through the Triton kernel",
             "variant: packed sequences through FlashAttention-2"), check="triton_vs_flash_varlen")


def frames_apart_variant(w: Workload, _: str) -> None:
    """One video's questions planned apart (op ``share_frames`` off: families only as token ids
    happen to sort) instead of sharing their frames and prompt prefix; meaningful with
    ``--per-video`` above 1. Checked first: the check prompts' letters' log-probs as the engine
    shares them against each prompt scored alone (``share_frames`` off can still share among the
    few check prompts, so it is no reference)."""
    frames_check(w)
    op_rows(w, "share_frames", ("ours-frames-shared", "ours-frames-apart"),
            ("variant: one video's questions share its frames and prompt prefix",
             "variant: one video's questions each with its own frames"), limit=w.lim_full)


def frames_check(w: Workload) -> None:
    """The check prompts scored together (one video's questions sharing its frames) against each
    alone; a check row ``{workload}_frames_shared_vs_alone`` that names how many requests shared."""
    engine = w.engine
    fams = plan_families(w.prompts, share_frames=engine.config.op("share_frames"))
    sharing = sum(len(f.members) for f in fams if len(f.members) > 1)
    together = ours_lps(engine, w.prompts)
    alone = torch.cat([ours_lps(engine, [p]) for p in w.prompts])
    # A check in which nothing shares would prove nothing: it fails.
    direct_row(w, "frames_shared_vs_alone", float((together - alone).abs().max()), {"requests_sharing": sharing},
               ok=sharing > 0, says=f", {sharing} of {len(w.prompts)} requests in sharing families")


def pipe_variant(w: Workload, _: str) -> None:
    """Decoded frames handed back through the worker pool's pipe or in shared memory (op
    ``decode_shm``)."""
    op_rows(w, "decode_shm", ("ours-shm", "ours-pipe"),
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
    "gc-freeze": Variant("both", False, gc_variant),
    "unpadded": Variant("visual", True, unpadded_variant),
    "pipe": Variant("visual", True, pipe_variant),
    "frames-apart": Variant("visual", False, frames_apart_variant),
    "fulllayer": Variant("both", False, full_layer_variant),
    "residual-apart": Variant("both", True, residual_variant),
    "silu": Variant("both", True, silu_variant),
    "swiglu": Variant("both", True, swiglu_variant),
    "flash-varlen": Variant("both", True, flash_varlen_variant),
    "vision-block": Variant("visual", False, vision_block_variant),
    "no-reads": Variant("visual", False, no_reads_variant),
    "vision-pow2": Variant("visual", False, vision_pow2_variant),
    "vision-norm": Variant("visual", True, vision_norm_variant),
    "attention-residual": Variant("both", True, attention_residual_variant),
    "memo-off": Variant("visual", False, memo_variant),
    "tree-mask": Variant("blind", False, tree_mask_variant),
    "batch512": Variant("blind", False, batch512_variant),
}


# Variant rows of the sweep workload (--variants): name -> the op flipped in them.
SWEEP_VARIANTS = {"decode-join": "decode_join", "decode-split": "decode_split", "graph-fused": "graph_fused",
                  "scored-last": "scored_last_layer",
                  "stage-ahead": "stage_ahead", "sweep-vision-norm": "vision_norm_kernel",
                  "sweep-attention-residual": "attention_residual", "qkv-packed": "qkv_packed"}
E2E_VARIANTS = ("ray",)  # rows of the e2e workload: ``benchcheck screen --executor ray`` as well
SWEEP_KNOB = "sweep-"  # ``sweep-<knob>N``: a host-side knob (``engine_variant``) in the sweep's rows


def is_sweep_variant(name: str) -> bool:
    """A variant row of the sweep workload: an op flipped (``SWEEP_VARIANTS``) or a knob
    (``sweep-firstN``: a first chunk of N requests, so 8 items decode as 3 + 5 rows for N = 3)."""
    return name in SWEEP_VARIANTS or (name.startswith(SWEEP_KNOB) and knob_of(name[len(SWEEP_KNOB):]) is not None)


def sweep_variant_engine(engine: HFEngine, name: str) -> tuple[HFEngine, str]:
    """The sweep variant's engine (decoding in batches of ``engine``'s K/V slots) and its note."""
    if name in SWEEP_VARIANTS:
        flip = ("-" if engine.config.op(SWEEP_VARIANTS[name]) else "+") + SWEEP_VARIANTS[name]
        return same_plan(engine.with_config(engine.config.with_ops(flip)), engine), f"variant: ops={flip}"
    found = engine_variant(engine, name[len(SWEEP_KNOB):])
    assert found is not None  # is_sweep_variant
    return same_plan(found[0], engine), found[1]


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
    if DECODE_SLOTS[0] and engine.decode_batch_tokens:
        print(f"  {name}: K/V slots a generation batch {engine.decode_batch_tokens} -> {DECODE_SLOTS[0]} "
              "(--decode-slots)", flush=True)
        engine.decode_batch_tokens = DECODE_SLOTS[0]
    frames = [jpeg(1000 + s, *size) for s in range(16)]
    reqs = [GenerateRequest(f"g{i}", "Question: what happens in the video?\nAnswer in one sentence.",
                            tuple(frames[(i + k) % len(frames)] for k in range(n_frames)), max_tokens=128)
            for i in range(n_items)]
    p = engine.encoder.encode(reqs[0].prompt, reqs[0].images, None)
    # Limit: the prefill's useful FLOPs at the matmul rate, then each decode step at the rate the
    # device copies memory: a step at batch 1 reads every weight of the language model and the
    # whole K/V cache once, and does too little arithmetic per byte to be bound by anything else.
    prefill_s = item_flops(engine.model.config, p.n_tokens, grids_of(p)) / (peak * 1e12)
    step_s = decode_step_bytes(engine, p.n_tokens + 128) / BANDWIDTH[0]
    limit = 1.0 / (prefill_s + 127 * step_s) if step_s == step_s else float("nan")
    print(f"  {name}: limits: prefill {prefill_s:.3f} s at the matmul peak, decode step {step_s * 1e3:.2f} ms "
          f"({decode_step_bytes(engine, p.n_tokens + 128) / 1e9:.1f} GB read at {BANDWIDTH[0] / 1e9:.0f} GB/s)",
          flush=True)
    stop = engine.stop_ids
    engine.stop_ids = set()  # random weights: generate all 128 tokens, as a real answer might
    chosen = engine.config.op("decode_graphs")
    # The decode steps the other way, and the graphs' fixed-shape steps run eagerly (a check
    # switch of the variant's own ``DecodeGraphs``, not a knob: no user runs it).
    flipped_engine = same_plan(engine.with_config(engine.config.with_ops(("-" if chosen else "+") + "decode_graphs")),
                               engine)
    fixed_engine = same_plan(engine.with_config(engine.config.with_ops("-decode_graphs")), engine)
    fixed_engine.decode_graphs.fixed_steps = True
    counts: dict[str, tuple[int, int]] = {}  # row -> (graphs captured, captures failed) in it

    def counted(mode: str, eng: HFEngine) -> Callable[[], object]:
        return counted_generate(counts, mode, eng, reqs)

    try:
        # Warm-up of both paths (the first 54,000-token prefill of a shape pays for its kernels' set-up).
        with plain(engine):
            naive_generate(engine, p, 2)
        engine.generate_sync([replace(reqs[0], max_tokens=2)])
        # And of replayed steps: their captures compile the small-row kernels (op graph_fused) for
        # each row count a decode batch has. With variants, every item, through each variant's
        # engine too: a variant that decodes in other batches (decode_join) would else pay for
        # its row counts' compiles in its timed row.
        warm = [replace(r, max_tokens=MIN_REPLAYED_STEPS + 2) for r in reqs]
        sweep_variants = sorted(v for v in VARIANTS if is_sweep_variant(v))
        engine.generate_sync(warm if sweep_variants else warm[:3])
        for v in sweep_variants:
            sweep_variant_engine(engine, v)[0].generate_sync(warm)
        naive_tokens: Any = None
        if not LEAN[0]:
            with plain(engine):
                naive_tokens = run_row(rows, name, "naive", engine, 1, float(p.n_tokens), limit,
                                       lambda: naive_generate(engine, p, 128),
                                       note="transformers' generate, one request")
        res = batched_row(rows, name, "ours", engine, reqs, prefill_s, p.n_tokens, limit, counted("ours", engine),
                          f"{n_frames} frames, 128 new tokens")
        if engine.config.op("decode_together") and n_items > 1 and not LEAN[0]:
            apart = engine.with_config(engine.config.with_ops("-decode_together"))
            run_row(rows, name, "ours-apart", apart, n_items, float(p.n_tokens), limit,
                    lambda: apart.generate_sync(reqs), note="variant: each item decoded alone (-decode_together)")
        variant_texts = {}
        variant_engines: dict[str, tuple[HFEngine, str]] = {}  # name -> (its engine, its rows' note)
        for v in sorted(v for v in VARIANTS if is_sweep_variant(v)):
            other_engine, note = sweep_variant_engine(engine, v)
            variant_engines[v] = (other_engine, note)
            got = batched_row(rows, name, f"ours-{v}", other_engine, reqs, prefill_s, p.n_tokens, limit,
                              partial(other_engine.generate_sync, reqs), note)
            variant_texts[v] = [g.text if isinstance(g, Generation) else None for g in got]  # type: ignore[attr-defined]
        other = not chosen
        flipped_mode = "ours-graphs" if other else "ours-eager"
        if not LEAN[0]:
            flipped = run_row(rows, name, flipped_mode, flipped_engine, n_items, float(p.n_tokens),
                              limit, counted(flipped_mode, flipped_engine),
                              note=f"variant: decode steps {'replayed as a CUDA graph' if other else 'run eagerly'}"
                                   + ("" if engine.device.type == "cuda" else " (no CUDA: eagerly too)"))
            fixed = run_row(rows, name, "fixed-eager", fixed_engine, n_items, float(p.n_tokens), limit,
                            lambda: fixed_engine.generate_sync(reqs),
                            note="check: the graphs' fixed-shape steps, eagerly")
            profile(name, lambda: engine.generate_sync(reqs[:1]))
        answer_rows(rows, checks, name, engine, reqs, prefill_s, step_s, variant_engines)
    finally:
        engine.stop_ids = stop
    for v, vt in variant_texts.items():
        same = sum(a == getattr(b, "text", None) for a, b in zip(vt, res, strict=True))  # type: ignore[call-overload]
        print(f"  sweep variant {v}: {same} of {n_items} texts equal the engine's (128 greedy tokens of a random "
              "bf16 model: a different rounding may pick another token)", flush=True)
    if LEAN[0]:  # no graph-check rows were run
        return
    runs = {"ours": res, flipped_mode: flipped, "fixed-eager": fixed}
    texts: dict[str, list[str]] = {}
    for mode, out in runs.items():
        bad = [g for g in out if not isinstance(g, Generation)]  # type: ignore[attr-defined]
        if bad:
            raise SystemExit(f"{name} {mode}: {len(bad)} failed: {bad[0]}")
        texts[mode] = [g.text for g in out]  # type: ignore[attr-defined]
    ours_row = next(r for r in rows if r.workload == name and r.mode == "ours")
    ours_row.note += f"; {np.mean([g.completion_tokens for g in res]):.0f} tokens generated"  # type: ignore[attr-defined]
    graph_row = "ours" if chosen else "ours-graphs"
    graph_texts = texts[graph_row]
    differ = sum(a != b for a, b in zip(graph_texts, texts["fixed-eager"], strict=True))
    naive_text = engine.tokenizer.decode(naive_tokens, skip_special_tokens=True)
    lead = {mode: next((i for i, (x, y) in enumerate(zip(t[0], naive_text, strict=False)) if x != y),
                       min(len(t[0]), len(naive_text))) for mode, t in texts.items()}
    caps, fails = counts[graph_row]
    replayed = graphs_replayed(engine, caps, fails)
    c = Check(name, n_items, float("nan"), 0.0, float(differ), differ == 0 and replayed,
              str(engine.dtype).replace("torch.", ""),
              {"graph_vs_fixed_eager_texts_differing": differ, "graph_row": graph_row, "graphs_captured": caps,
               "graph_failures": fails, "chars_equal_to_naive": lead, "naive_chars": len(naive_text)})
    checks.append(c)
    print(f"  check {name}: graphs ({graph_row}) vs the same steps eagerly, {differ} of {n_items} texts differ, "
          f"{caps} graphs captured in that row ({fails} failed); item 0's leading characters equal to transformers' "
          f"generate, of {len(naive_text)}: {lead} (naive suppresses end tokens, ours may emit them)", flush=True)


def same_plan(other: HFEngine, engine: HFEngine) -> HFEngine:
    """``other`` decoding in batches of ``engine``'s K/V slots. A copy made by ``with_config``
    sizes its slots from the device memory free when it is made, which the first engine's cached
    reservations have lowered: on an 80 GB card the copy then decoded in smaller batches (H100,
    2026-12-05: peaks 46.5 against 37.6 GiB), so a row meant to differ in one op differed in its
    plan too, and a random bf16 model's greedy tokens with it (decision 119)."""
    if other.decode_batch_tokens and engine.decode_batch_tokens:
        other.decode_batch_tokens = engine.decode_batch_tokens
    return other


def counted_generate(counts: dict[str, tuple[int, int]], mode: str, engine: HFEngine,
                     reqs: list[GenerateRequest]) -> Callable[[], object]:
    """A row's call: ``engine.generate_sync(reqs)``, the graphs it captured and the captures that
    failed put in ``counts[mode]``."""
    def run() -> object:
        graphs = engine.decode_graphs
        c0, f0 = graphs.captured, graphs.failed
        out = engine.generate_sync(reqs)
        counts[mode] = (graphs.captured - c0, graphs.failed - f0)
        return out
    return run


def graphs_replayed(engine: HFEngine, captured: int, failed: int) -> bool:
    """Whether a row's decode steps really ran as graphs: off CUDA there are none to run; on CUDA
    at least one capture and no failed one (a failed capture runs eagerly, and eager against eager
    would pass unseen)."""
    return engine.device.type != "cuda" or (captured >= 1 and failed == 0)


ANSWER_TOKENS = 3  # a real answer: a letter (and a word), then the end token
ANSWER_ROUNDS = [1]  # rounds of the answer rows (--answer-rounds; set in main)
LEAN = [False]  # --sweep-lean: the sweep's engine and variant rows only (set in main)
DECODE_SLOTS = [0]  # --decode-slots: the sweep engine's K/V slots a generation batch; 0: its own (set in main)


def answer_rows(rows: list[Row], checks: list[Check], name: str, engine: HFEngine, reqs: list[GenerateRequest],
                prefill_s: float, step_s: float, variants: dict[str, tuple[HFEngine, str]] | None = None) -> None:
    """The sweep item answered as a real model answers: a few tokens, then its end token. A
    random-weight model never emits one (and repeats its greedy tokens, so a stop token picked
    from them came too early for most items), so the stop is forced as ``sweep_mix
    --answer-stop`` forces it (``benchmarks.shared.answer_stop``): each batch's finish flag set
    from step ``ANSWER_TOKENS`` on, read through the engine's look-back as a real stop is;
    ``max_tokens`` stays 128, so the steps are reserved and captured as a CUDA graph. Rows:
    ``answer`` (the engine as chosen) and ``answer-lookback4`` (the flag read 4 steps late, the
    previous default); the check: both give the same texts, every answer has ``ANSWER_TOKENS``
    tokens, and on CUDA graphs were captured, none failing. ``variants``: an ``answer-NAME`` row
    for each (the sweep's ``--variants`` engines), after those two."""
    answer = [replace(r, max_tokens=128) for r in reqs]
    n = len(answer)
    out: dict[str, list[Any]] = {}
    counts: dict[str, tuple[int, int]] = {}
    notes = {f"answer-{v}": note for v, (_, note) in (variants or {}).items()}
    runs: list[tuple[str, HFEngine]] = [("answer", engine)]
    if not LEAN[0]:
        runs.append(("answer-lookback4", same_plan(engine.with_config(replace(engine.config, decode_lookback=4)),
                                                   engine)))
    runs += [(f"answer-{v}", e) for v, (e, _) in (variants or {}).items()]
    tokens = rows[-1].prompt_tokens
    limit = 1.0 / (prefill_s + (ANSWER_TOKENS - 1) * step_s) if step_s == step_s else float("nan")
    about = (f"a real answer: {ANSWER_TOKENS} new tokens an item, then the stop as a real end token ends it (the "
             "finish flag forced from that step on; max_tokens 128 kept, so the steps are reserved and, on CUDA, "
             "captured)")
    with answers_stop_after(ANSWER_TOKENS):
        for r in range(ANSWER_ROUNDS[0]):  # rounds alternate the rows: a difference is not their order's
            for mode, eng in runs:
                label = mode if r == 0 else f"{mode}#{r + 1}"
                note = about + (f"; {notes[mode]}" if mode in notes else "")
                res = run_row(rows, name, label, eng, n, tokens, limit, counted_generate(counts, label, eng, answer),
                              note=note)
                out.setdefault(mode, list(res))  # type: ignore[call-overload]
    bad = [g for v in out.values() for g in v if not isinstance(g, Generation)]
    if bad:
        raise SystemExit(f"{name} answer rows: {len(bad)} failed: {bad[0]}")
    made = [g.completion_tokens for g in out["answer"]]
    late = out.get("answer-lookback4", out["answer"])  # --sweep-lean: no look-back row to compare
    differ = sum(a.text != b.text for a, b in zip(out["answer"], late, strict=True))
    caps, fails = counts["answer"]
    ok = differ == 0 and all(m == ANSWER_TOKENS for m in made) and graphs_replayed(engine, caps, fails)
    checks.append(Check(f"{name}_answer", n, float("nan"), 0.0, float(differ), ok,
                        str(engine.dtype).replace("torch.", ""),
                        {"texts_differing_lookback1_vs_4": differ if "answer-lookback4" in out else None,
                         "new_tokens": made, "graphs_captured": caps,
                         "graph_failures": fails}))
    lookback = ("no look-back row (--sweep-lean)" if "answer-lookback4" not in out
                else f"look-back 1 vs 4: {differ} of {n} texts differ")
    print(f"  {name} answers: {made} new tokens; {lookback}; {caps} graphs captured ({fails} failed)", flush=True)


def decode_step_bytes(engine: HFEngine, cached: int, rows: int = 1) -> float:
    """Bytes one decode step of ``rows`` rows reads: the language model's weights, the output
    layer's, and each row's K/V cache of ``cached`` tokens."""
    t = engine.model.config.text_config
    lm = engine.model.model.language_model
    weights = sum(x.numel() * x.element_size() for x in lm.parameters())
    head = engine.model.lm_head.weight
    if head.data_ptr() != lm.embed_tokens.weight.data_ptr():
        weights += head.numel() * head.element_size()
    kv = 2 * t.num_hidden_layers * t.num_key_value_heads * t.head_dim * cached * head.element_size()
    return float(weights + rows * kv)


def batched_row(rows: list[Row], name: str, mode: str, engine: HFEngine, reqs: list[GenerateRequest],
                prefill_s: float, prompt_tokens: int, limit: float, fn: Callable[[], object], note: str) -> object:
    """A sweep row whose limit follows the decode batches the engine ran (``batched_limit``) where
    it decoded rows together (op ``decode_together``), else ``limit`` (every row alone)."""
    before = collections.Counter(engine.decode_rows)  # the rows of each batch it decodes (joined ones as one)
    res = run_row(rows, name, mode, engine, len(reqs), float(prompt_tokens), limit, fn, note=note, echo=False)
    seen = sorted((engine.decode_rows - before).elements())
    r = rows[-1]
    if len(seen) < len(reqs):  # a step's weights read once for several rows
        together = batched_limit(engine, seen, prefill_s, prompt_tokens + 128, 127)
        r.limit_per_s, r.ratio = together, r.items_per_s / together
        r.ratio_sustained = r.ratio / SUSTAINED[0]
        r.note += f"; decode batches of {'+'.join(map(str, seen))} rows (limit for these)"
    row_line(r)
    return res


def batched_limit(engine: HFEngine, rows: list[int], prefill_s: float, cached: int, steps: int) -> float:
    """Items a second at the limit when the items' decode steps run in batches of ``rows`` rows:
    each prefill at the matmul rate, each batch's ``steps`` steps at the copy bandwidth."""
    decode = sum(steps * decode_step_bytes(engine, cached, b) / BANDWIDTH[0] for b in rows)
    return sum(rows) / (sum(rows) * prefill_s + decode) if rows else float("nan")


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
    ap.add_argument("--sweep-items", type=int, default=3,
                    help="582-frame items of the sweep workload (one call: the sweep sends calls of 8)")
    ap.add_argument("--profile", default="", help="comma-separated workloads to profile (one call each)")
    ap.add_argument("--variants", default="",
                    help="comma-separated variant rows, each the engine with another HFConfig: "
                         "unpadded, pipe, frames-apart (visual workloads); tree-mask (blind: the "
                         "other tree attention), "
                         "batch512 (blind); nopace, paceN (launches paced N blocks ahead), growN (chunks growing N "
                         "times), fulllayer (the last layer over every position), residual-apart (the MLP's residual "
                         "added after the down projection, not in its product), silu (SiLU-times-up the other way: "
                         "Triton kernel or compiled), swiglu (the gate/up products the other way: one Triton kernel "
                         "with SiLU-times-up in their epilogue, or cuBLAS then SiLU-times-up), flash-varlen (packed "
                         "rows' attention the other way: "
                         "FlashAttention-2 or the Triton kernel), vision-block (visual: the vision blocks the other "
                         "way: fused or transformers' own), vision-pow2 (visual: the vision attention in power-of-two "
                         "image counts per call or not), no-reads (visual: the visual forward with or without its "
                         "device reads), memo-off (visual: every request decodes its own "
                         "frames), encN (N encoding threads; every "
                         "workload), decodeN (images decoded in N worker "
                         "processes; decode0: in the encoding threads), firstN (a first chunk of N requests), "
                         "tokensN (batches of up to N tokens); ray (e2e: the same screen on --executor ray); "
                         "decode-split (sweep: the decode steps' attention the other way, split kernel or products); "
                         "graph-fused (sweep: the replayed decode steps' norms, rotary and SiLU compiled or plain); "
                         "scored-last (sweep: the prefill's last layer at each row's last token or everywhere); "
                         "stage-ahead (sweep: a batch's host inputs built while the batch before it runs, or at "
                         "its launch); vision-norm (visual) and sweep-vision-norm (sweep): the vision LayerNorms "
                         "as one Triton pass or compiled; attention-residual (scoring) and sweep-attention-residual "
                         "(sweep): the text attention's residual in its output projection's product or after it; "
                         "sweep-<knob>N (sweep: a knob as above, e.g. sweep-first3: a first chunk of 3 requests; "
                         "decode batches still follow the K/V slots that fit: on an 80 GB H100 1+2+2+1+2 rows with "
                         "it or without, decision 125); "
                         "each "
                         "sweep variant also gets a real-answer row, answer-NAME")
    ap.add_argument("--answer-rounds", type=int, default=1,
                    help="rounds of the sweep's answer rows, each round every row once (later rounds' modes "
                         "end in #N): variant rows then alternate with the engine's")
    ap.add_argument("--sweep-lean", action="store_true",
                    help="the sweep's rows that compare variants only: the engine's and each variant's 128-token "
                         "and answer rows; no naive, apart, graph-check or look-back rows (a variant call that "
                         "fits a device call's limit)")
    ap.add_argument("--decode-slots", type=int, default=0,
                    help="the sweep's K/V slots a generation batch (the engine's decode_batch_tokens as its "
                         "device's free memory set it; 0: as set): another card's decode plan on this one, e.g. "
                         "272000 (5 rows of 54,400 slots) for the H200's on an H100")
    ap.add_argument("--decode-tuning", default="",
                    help="the split decode-attention kernel launched as this decode_split.Tuning label says, for "
                         "the whole run (e.g. 64/4/3+torch, decision 119's launch; default: the engine's)")
    args = ap.parse_args()
    if args.decode_tuning:
        try:
            decode_split.TUNING = decode_split.Tuning.parse(args.decode_tuning)
        except ValueError as err:
            raise SystemExit(f"--decode-tuning: {err}") from None
    ANSWER_ROUNDS[0] = max(1, args.answer_rounds)
    LEAN[0] = args.sweep_lean
    DECODE_SLOTS[0] = max(0, args.decode_slots)
    VARIANTS.update(v for v in args.variants.split(",") if v)
    unknown = sorted(v for v in VARIANTS if variant(v) is None and v not in E2E_VARIANTS and not is_sweep_variant(v))
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
    BANDWIDTH[0] = copy_bandwidth(device)
    print(f"copy bandwidth: {BANDWIDTH[0] / 1e9:.0f} GB/s", flush=True)
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
            sweep(rows, checks, "sweep", engine, 2 if args.tiny else args.sweep_items, 16 if args.tiny else 582, peak,
                  (416, 224))
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
        from benchmarks import gpu_e2e

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
        "decode_tuning": decode_split.TUNING.label(),
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
             "| GPU busy | MHz | W | GC ms | HFConfig | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    lines += [f"| {r.workload} | {r.mode} | {r.items} | {r.prompt_tokens:.0f} | {r.items_per_s:.1f} | "
              f"{r.limit_per_s:.1f} | {r.ratio:.1%} | {r.ratio_sustained:.1%} | {r.peak_gib:.1f} | {r.busy:.0%} | "
              f"{r.mhz:.0f} | {r.watts:.0f} | {r.gc_ms:.0f} | {r.config_hash} | "
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
