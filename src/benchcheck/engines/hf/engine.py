"""The ``hf`` engine: Qwen3-VL in process with transformers, answering as a vLLM server would.

Each request is rendered with the model's chat template exactly as vLLM renders the protocol's
messages (``inputs.encoder``), requests are batched by length with explicit positions (``forward.batch``;
right padding and no mask for scoring, left padding for generation), and scoring is one prefill
forward per request: log-softmax at its last position, top-20 tokens decoded one by one as vLLM
decodes its logprobs (``forward.score``).

The blocking torch work runs in a worker thread, so an event loop (a server) keeps accepting
requests meanwhile. Importable with torch, transformers, numpy and Pillow alone.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.base import Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.hf.attention.varlen import flash_available
from benchcheck.engines.hf.checkpoint import NotACheckpoint, pick_device, pick_dtype, resolve_checkpoint
from benchcheck.engines.hf.forward.batch import collate
from benchcheck.engines.hf.forward.generate import DecodeGraphs, greedy_batch
from benchcheck.engines.hf.forward.packed import pack
from benchcheck.engines.hf.forward.pixels import PixelSpec
from benchcheck.engines.hf.forward.score import PendingTop, score_batch, score_packed
from benchcheck.engines.hf.inputs.decode import BadInput
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt, PromptEncoder, PromptParts
from benchcheck.engines.hf.model.fused import (
    compile_enabled,
)
from benchcheck.engines.hf.model.install import install_fast_paths
from benchcheck.engines.hf.runtime.pacing import use_paced_launches
from benchcheck.engines.hf.schedule.families import lone_families, worth_sharing
from benchcheck.engines.hf.schedule.pipeline import Encoded, Job, Plan, PlannedBatch, one_row, run_pipeline
from benchcheck.engines.letters_exact import exact_entries, letter_variants
from benchcheck.engines.marker import marker_revision, read_marker
from benchcheck.engines.options import EngineOptionError, EngineOptions
from benchcheck.engines.transformers_lib import transformers_module
from benchcheck.errors import first_line

# Longest prompt of a batch that shares nothing and is still scored unpadded in one row (see
# ``HFEngine.unpadded_scoring``): up to here the attention is ~1 % of an 8B layer's work, so the
# slower variable-length kernel costs less than the padding it saves.
UNPADDED_MAX_TOKENS = 512


def decode_processes(device: torch.device) -> int:
    """Worker processes decoding images: on CUDA half the cores this process may use, at most 8 (a 32-frame request
    is split into 4 pieces of 8 frames, and two encoding threads submit at once); none elsewhere."""
    if device.type != "cuda":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return min(8, max(1, cores // 2))


def _tokens_that_fit(model: Any, max_tokens: int) -> int:
    """``max_tokens``, or fewer when a batch of that many tokens would not fit in half of the
    device's free memory (the live activations of one token: about 8 hidden-size and 3
    MLP-size vectors in the model's dtype; the vision tower's are smaller per token)."""
    param = next(model.parameters())
    if param.device.type != "cuda":
        return max_tokens
    free, _ = torch.cuda.mem_get_info(param.device)
    t = model.config.text_config
    per_token = param.element_size() * (8 * t.hidden_size + 3 * t.intermediate_size)
    return max(1024, min(max_tokens, int(free // 2 // per_token)))


class HFEngine:
    """In-process Qwen3-VL scoring and greedy generation (the ``Engine`` protocol)."""

    name = "hf"

    def __init__(
        self,
        model: str | Path,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        max_batch_size: int = 256,
        max_batch_tokens: int = 65536,
        served_name: str | None = None,
        strict: bool = False,
    ) -> None:
        tf = transformers_module()
        folder, resolved = resolve_checkpoint(model, revision)
        marker = read_marker(folder)
        if marker is not None and resolved is None:  # rows say what the checkpoint says: random weights
            resolved = marker_revision(marker)
        dev = pick_device(device)
        try:
            net = tf.Qwen3VLForConditionalGeneration.from_pretrained(
                folder, dtype=pick_dtype(dtype, dev), attn_implementation="sdpa"
            )
            tokenizer = tf.AutoTokenizer.from_pretrained(folder)
            encoder = PromptEncoder.from_folder(folder, tokenizer, net.config.image_token_id)
        except Exception as e:  # a damaged or foreign checkpoint: transformers, safetensors, tokenizers, JSON
            why = f"cannot load a Qwen3-VL checkpoint from it ({type(e).__name__}: {first_line(e, 200)})"
            raise NotACheckpoint(folder, why) from e
        self._setup(net.to(dev).eval(), encoder, served_name or str(model), resolved, max_batch_size, max_batch_tokens,
                    strict)

    @classmethod
    def from_options(cls, o: EngineOptions) -> HFEngine:
        if not o.model:
            raise EngineOptionError("--engine hf needs --model (a checkpoint folder or hub name)")
        return cls(o.model, o.revision, o.device, max_batch_size=o.max_batch_size or 256, served_name=o.served_name)

    def count_tokens(self, req: GenerateRequest) -> int:
        """The prompt's tokens as this engine counts them against its context."""
        return int(self.encoder.encode(req.prompt, req.images, req.assistant_prefix, req.system).n_tokens)

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        preprocessor_config: dict[str, Any],
        *,
        name: str,
        revision: str | None = None,
        max_batch_size: int = 256,
        max_batch_tokens: int = 65536,
        strict: bool = False,
    ) -> HFEngine:
        """Wrap a model already built in memory (the random-weight true shapes)."""
        engine = cls.__new__(cls)
        encoder = PromptEncoder(tokenizer, preprocessor_config, model.config.image_token_id)
        engine._setup(model.eval(), encoder, name, revision, max_batch_size, max_batch_tokens, strict)
        return engine

    def _setup(
        self, model: Any, encoder: PromptEncoder, name: str, revision: str | None, max_bs: int, max_tokens: int,
        strict: bool = False,
    ) -> None:
        if model.config.model_type != "qwen3_vl":
            raise ValueError(f"the hf engine runs Qwen3-VL checkpoints; got model_type {model.config.model_type!r}")
        if max_bs < 1 or max_tokens < 1:
            raise ValueError("max_batch_size and max_batch_tokens must be positive")
        merge = int(model.config.vision_config.spatial_merge_size)
        if encoder.merge != merge:  # positions and image tokens are counted with the processor's
            raise ValueError(f"preprocessor_config.json merges {encoder.merge}x{encoder.merge} patches, "
                             f"the model's vision config {merge}x{merge}")
        self.model = model
        fuse = compile_enabled(next(model.parameters()).device)
        qkv_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
        if fuse:  # compile_enabled: CUDA with Triton
            from benchcheck.engines.hf.kernels.vision_rotary_triton import qkv_rotary
        # Every fast path checked against this transformers before it is installed; what fell
        # back is one warning (or FastPathMismatch with ``strict``), and stays in the report.
        self.fast_paths = install_fast_paths(model, fuse=fuse, strict=strict, qkv_rotary=qkv_rotary)
        installed = self.fast_paths.installed
        fused_attention = installed.get("fused_attention", 0) > 0
        # Scoring forwards run the last decoder layer at the scored positions only (model.scored);
        # False: the whole layer (benchmarks compare the two).
        self.scored_last_layer = installed.get("scored_last_layer", 0) > 0
        # The launching thread waits for the device without holding Python's lock (runtime.pacing).
        self.pacer = use_paced_launches(model)
        self.encoder = encoder
        self.tokenizer = encoder.tokenizer
        self.model_name = name
        self.revision = revision
        self.max_batch_size = max_bs
        self.max_batch_tokens = _tokens_that_fit(model, max_tokens)
        self.max_model_len = int(model.config.text_config.max_position_embeddings)
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.pixels = PixelSpec.build(encoder.pixel_table, encoder.patch_layout, self.device)
        self.pad_id = int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0)
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos_list = eos if isinstance(eos, list) else [eos]
        self.stop_ids = {int(t) for t in [*eos_list, self.tokenizer.eos_token_id] if t is not None}
        self._token_text: dict[int, str] = {}
        # Exact letter scores: every letter variant's log-prob is gathered from the full softmax.
        self.letters = letter_variants(self.tokenizer, min(len(self.tokenizer), model.config.text_config.vocab_size))
        self._lock = threading.Lock()  # one forward at a time on the device
        # Tuning knobs (attributes, not constructor arguments): requests sorted together by
        # length (None: 8 batches' worth of text-only requests, 2 of requests with images, whose
        # encoding takes longer), and threads that encode requests: two, as more contend with the
        # thread that launches the device work for Python's lock (decision 002).
        self.sort_window: int | None = None
        self.chunk_growth = 2  # each chunk this many times the one before (``schedule.pipeline``)
        self.first_chunk: int | None = None  # requests in the first chunk; None: by what they carry
        # Scoring requests that start with the same tokens (step 1's permutations) share them:
        # one packed forward per family (schedule.families). False: every request runs in full.
        self.share_prefixes = True
        # Generation's decode steps replayed as a CUDA graph on CUDA (``forward.generate``; the record
        # also counts captures and failures), the same texts as eager steps. Only with the fused
        # attention forward, the way to ``decode_attention``: without it a fixed-shape step is
        # transformers' masked SDPA, slower than eager steps (decision 015).
        self.decode_graphs = DecodeGraphs(enabled=fused_attention)
        # How a packed batch's tree attention runs: "varlen" (all families in one unpadded row,
        # FlashAttention's variable-length kernel, no mask: CUDA in bf16/fp16) or "mask" (a
        # left-padded row per family with a dense tree mask: everywhere else). Picked here from
        # the device; set it only to compare the two (benchmarks) or to test the one-row
        # plumbing on the CPU, where "varlen" runs a per-sequence reference kernel.
        varlen_ok = installed.get("tree_attention", 0) > 0
        self.tree_attention = "varlen" if varlen_ok and flash_available(self.device, self.dtype) else "mask"
        # Batches that share nothing and whose prompts are short (at most UNPADDED_MAX_TOKENS)
        # scored in one row without padding (with "varlen" only) instead of right-padded rows,
        # a request alone one attention sequence with its keys in place. Long prompts stay
        # padded: the variable-length kernels are slower than cuDNN's causal one on long
        # sequences, and attention grows with the length while padding does not (decision 016).
        self.unpadded_scoring = True
        self._pool = ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1), thread_name_prefix="hf-encode")
        # On CUDA images decode in worker processes (inputs.decode): the thread launching the device
        # work then has Python's lock to itself. Elsewhere the encoding threads decode them.
        self.encoder.decoder.processes = decode_processes(self.device)
        # After its first call (the compiles, autotuning and first batch shapes done) the engine
        # freezes what is alive (``gc.freeze()``, as vLLM does after start-up): the libraries',
        # the model's and the compilers' millions of objects then leave the collector's full
        # scans, which hold Python's lock while the launching thread waits (decision 027).
        # Once per engine only: cyclic garbage frozen with it is never collected. On CUDA only,
        # where the launching thread is what keeps the device busy; False: the collector as is.
        self.freeze_collector = self.device.type == "cuda"
        self._collector_frozen = False

    def set_encode_threads(self, n: int) -> None:
        """Use ``n`` threads to render, tokenize and decode images (default: 2)."""
        self._pool.shutdown(wait=True)
        self._pool = ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="hf-encode")

    # -- the Engine protocol -------------------------------------------------------------

    async def score(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]:
        """Top log-probs of the first answer token of each request (one forward each)."""
        return await asyncio.to_thread(self.score_sync, reqs)

    async def generate(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]:
        """Greedy text of each request, up to its ``max_tokens``."""
        return await asyncio.to_thread(self.generate_sync, reqs)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.encoder.decoder.close()
        self.encoder.memo.clear()

    # -- blocking implementations --------------------------------------------------------

    def score_sync(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]:
        """``score`` without the event loop (benchmarks, scripts)."""
        jobs = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, None, 1) for r in reqs]

        def run(planned: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[LetterScores | Failure]]:
            t0 = time.perf_counter()
            idx = planned.idx
            k = min(max(reqs[i].top_logprobs for i in idx), self.model.config.text_config.vocab_size)
            prompts = [e.prompt for e in enc]
            gather = self._gather_ids([reqs[i] for i in idx])
            gather_t = torch.tensor(gather, dtype=torch.long)
            varlen = self.tree_attention == "varlen"
            # The families the pipeline planned this batch with (none unless share_prefixes), or
            # each request alone in the one unpadded row.
            families = list(planned.families)
            shared = worth_sharing(families)
            packed_row = shared or one_row(prompts, self.one_row_limit())
            if packed_row and not shared:
                families = lone_families(prompts)
            with self._lock:
                if packed_row:
                    packed = pack(prompts, families, self.pad_id, self.pixels, self.dtype, one_row=varlen)
                    pending = score_packed(self.model, packed, k, gather_t, self.scored_last_layer)
                else:
                    batch = collate(prompts, self.pad_id, self.pixels, self.dtype, right=True)
                    pending = score_batch(self.model, batch, k, gather_t, self.scored_last_layer)
            return lambda: finish(idx, enc, pending, t0, gather)

        def finish(idx: list[int], enc: list[Encoded], pending: PendingTop, t0: float,
                   gather: list[int]) -> list[LetterScores | Failure]:
            values, ids = pending.wait()
            dt = time.perf_counter() - t0
            res: list[LetterScores | Failure] = []
            for row, (i, e) in enumerate(zip(idx, enc, strict=True)):
                n = reqs[i].top_logprobs
                top: list[dict[str, float | str]] = [
                    {"token": self._text_of(t), "logprob": v}
                    for t, v in zip(ids[row, :n].tolist(), values[row, :n].tolist(), strict=True)
                ]
                res.append(
                    LetterScores(
                        request_id=reqs[i].request_id,
                        top=top,
                        top1_token=str(top[0]["token"]) if top else "",
                        prompt_tokens=e.prompt.n_tokens,
                        latency_s=dt + e.encode_s,
                        model=self.model_name,
                        exact=self._exact(reqs[i], gather, pending.gathered, row),
                        exact_source="full_softmax",
                    )
                )
            return res

        try:
            return run_pipeline(jobs, self._encode, self._pool, self._plan(), run, share=self.share_prefixes)
        finally:
            self._freeze_once()

    def generate_sync(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]:
        """``generate`` without the event loop."""
        jobs = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, r.system, r.max_tokens) for r in reqs]

        def run(planned: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[Generation | Failure]]:
            t0 = time.perf_counter()
            idx = planned.idx
            with self._lock:
                batch = collate([e.prompt for e in enc], self.pad_id, self.pixels, self.dtype)
                new = greedy_batch(self.model, batch, [reqs[i].max_tokens for i in idx], self.stop_ids, self.pad_id,
                                   graphs=self.decode_graphs, pacer=self.pacer)
            dt = time.perf_counter() - t0
            return lambda: [
                Generation(
                    request_id=reqs[i].request_id,
                    text=self.tokenizer.decode(toks, skip_special_tokens=True),
                    prompt_tokens=e.prompt.n_tokens,
                    completion_tokens=len(toks),
                    latency_s=dt + e.encode_s,
                    model=self.model_name,
                )
                for i, e, toks in zip(idx, enc, new, strict=True)
            ]

        try:
            return run_pipeline(jobs, self._encode, self._pool, self._plan(), run)
        finally:
            self._freeze_once()

    # -- helpers -------------------------------------------------------------------------

    def _freeze_once(self) -> None:
        """``gc.freeze()`` after the engine's first call, if ``freeze_collector`` (see __init__)."""
        if self.freeze_collector and not self._collector_frozen:
            self._collector_frozen = True
            gc.freeze()

    def _encode(self, jobs: Sequence[Job]) -> list[Encoded | Failure]:
        """A block of requests encoded together (``encode_many``); each fails on its own."""
        t0 = time.perf_counter()
        encoded = self.encoder.encode_many([PromptParts(j.prompt, j.images, j.prefix, j.system) for j in jobs])
        dt = (time.perf_counter() - t0) / max(1, len(jobs))
        return [self._checked(j, e, dt) for j, e in zip(jobs, encoded, strict=True)]

    def _checked(self, job: Job, enc: EncodedPrompt | BadInput, encode_s: float) -> Encoded | Failure:
        if isinstance(enc, BadInput):
            return Failure(job.request_id, "bad_request", str(enc), status=400)
        if enc.n_tokens + job.new_tokens > self.max_model_len:
            # vLLM's wording; clients detect a context-too-long failure by "maximum context length".
            msg = (
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{enc.n_tokens + job.new_tokens} tokens ({enc.n_tokens} in the messages, {job.new_tokens} in "
                "the completion). Please reduce the length of the messages or completion."
            )
            return Failure(job.request_id, "context_too_long", msg, status=400)
        return Encoded(enc, job.new_tokens, encode_s)

    def _plan(self) -> Plan:
        return Plan(self.max_batch_size, self.max_batch_tokens, self.sort_window, self.chunk_growth, self.first_chunk,
                    self.one_row_limit())

    def one_row_limit(self) -> int:
        """The longest prompt of a batch sharing nothing that still runs unpadded in one row (0: none)."""
        return UNPADDED_MAX_TOKENS if self.unpadded_scoring and self.tree_attention == "varlen" else 0

    def _gather_ids(self, reqs: Sequence[ScoreRequest]) -> list[int]:
        """The ids whose exact log-probs a batch needs: each request's ``logprob_token_ids``, or
        the letter variants for a request that names none."""
        ids: set[int] = set()
        for r in reqs:
            ids.update(r.logprob_token_ids or self.letters.ids)
        vocab = int(self.model.config.text_config.vocab_size)
        return sorted(i for i in ids if 0 <= i < vocab)

    def _exact(self, req: ScoreRequest, gather: list[int], gathered: torch.Tensor | None,
               row: int) -> list[dict[str, float | str | int]]:
        if gathered is None:
            return []
        col = {t: j for j, t in enumerate(gather)}
        wanted = [i for i in (req.logprob_token_ids or self.letters.ids) if i in col]
        values = gathered[row, [col[i] for i in wanted]].tolist()
        return exact_entries(wanted, [self._text_of(i) for i in wanted], values)

    def _text_of(self, token_id: int) -> str:
        """A token's text as vLLM reports it in logprobs: that one id decoded on its own."""
        s = self._token_text.get(token_id)
        if s is None:
            s = self._token_text[token_id] = self.tokenizer.decode([token_id])
        return s
