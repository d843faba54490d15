"""The ``hf`` engine: Qwen3-VL in process with transformers, answering as a vLLM server would.

Each request is rendered with the model's chat template exactly as vLLM renders the protocol's
messages (``inputs.encoder``), requests are batched by length with explicit positions (``forward.batch``;
right padding and no mask for scoring, left padding for generation), and scoring is one prefill
forward per request: log-softmax at its last position, top-20 tokens decoded one by one as vLLM
decodes its logprobs (``forward.score``).

The blocking torch work runs in a worker thread, so an event loop (a server) keeps accepting
requests meanwhile; a call whose task is cancelled (Ctrl-C) stops that thread at its next batch.
Importable with torch, transformers, numpy and Pillow alone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import dataclasses
import gc
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import torch

from benchcheck.engines.base import (
    CallCancelled,
    Failure,
    GenerateRequest,
    Generation,
    LetterScores,
    ScoreRequest,
)
from benchcheck.engines.hf.attention.sdpa import PlanMemo
from benchcheck.engines.hf.attention.varlen import flash_available
from benchcheck.engines.hf.checkpoint import NotACheckpoint, pick_device, pick_dtype, resolve_checkpoint
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.forward.batch import HostBatch, collate, stage, upload
from benchcheck.engines.hf.forward.generate import DecodeGraphs, Prefilled, greedy_start, kv_shape, prefill
from benchcheck.engines.hf.forward.packed import pack
from benchcheck.engines.hf.forward.pixels import PixelSpec
from benchcheck.engines.hf.forward.score import PendingTop, score_batch, score_packed
from benchcheck.engines.hf.inputs.decode import BadInput, FrameDecoder
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt, PromptEncoder, PromptParts
from benchcheck.engines.hf.inputs.frame_memo import FrameMemo
from benchcheck.engines.hf.model.fused import compile_enabled
from benchcheck.engines.hf.model.install import fast_paths, install_fast_paths
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.runtime.cancel import Cancellations
from benchcheck.engines.hf.runtime.launcher import Launcher
from benchcheck.engines.hf.runtime.pacing import use_paced_launches
from benchcheck.engines.hf.schedule.batches import prefill_groups
from benchcheck.engines.hf.schedule.families import lone_families, worth_sharing
from benchcheck.engines.hf.schedule.pipeline import (
    BatchCut,
    Encoded,
    Job,
    Plan,
    PlannedBatch,
    Stopped,
    join_fits,
    one_row,
    run_pipeline,
)
from benchcheck.engines.letters_exact import exact_entries, letter_variants
from benchcheck.engines.marker import marker_revision, read_marker
from benchcheck.engines.options import EngineOptionError, EngineOptions
from benchcheck.engines.transformers_lib import transformers_module
from benchcheck.errors import first_line

# Ops chosen when an engine is set up on a model (they install the model's forwards): an engine
# with another config on the same model (``HFEngine.with_config``) keeps them.
SETUP_OPS = ("rms_norm", "fused_mlp", "text_attention", "vision_rotary")
# The fast paths (``model.install``) each set-up op installs; off, they are not installed.
SETUP_PATHS = {"rms_norm": ("fused_norms",), "fused_mlp": ("fused_mlp", "fused_layers"),
               "text_attention": ("fused_attention",), "vision_rotary": ()}

T = TypeVar("T")
Q = TypeVar("Q", ScoreRequest, GenerateRequest)
A = TypeVar("A", LetterScores, Generation)


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


def _kv_slots_that_fit(model: Any, max_slots: int, floor: int) -> int:
    """``max_slots`` K/V slots, or fewer when their keys and values would not fit in a third of the
    device's free memory (the prefill's activations take up to half: ``_tokens_that_fit``); never
    below ``floor`` (a batch of ``max_batch_tokens`` reserves its slots as before)."""
    param = next(model.parameters())
    if param.device.type != "cuda":
        return max(floor, max_slots)
    free, _ = torch.cuda.mem_get_info(param.device)
    kv_heads, head = kv_shape(model)
    per_slot = param.element_size() * 2 * model.config.text_config.num_hidden_layers * kv_heads * head
    return max(floor, min(max_slots, int(free // 3 // per_slot)))


class HFEngine:
    """In-process Qwen3-VL scoring and greedy generation (the ``Engine`` protocol)."""

    name = "hf"

    def __init__(
        self,
        model: str | Path,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        max_batch_size: int | None = None,
        max_batch_tokens: int | None = None,
        served_name: str | None = None,
        config: HFConfig | None = None,
        strict: bool = False,
    ) -> None:
        """``config``: every knob (``HFConfig``; default: its defaults); ``max_batch_size`` and
        ``max_batch_tokens``, where given, replace the config's."""
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
        self._setup(net.to(dev).eval(), encoder, served_name or str(model), resolved,
                    _sized(config, max_batch_size, max_batch_tokens), strict)

    @classmethod
    def from_options(cls, o: EngineOptions) -> HFEngine:
        if not o.model:
            raise EngineOptionError("--engine hf needs --model (a checkpoint folder or hub name)")
        try:
            config = HFConfig.parse(o.hf_config)
        except ValueError as e:
            raise EngineOptionError(str(e)) from None
        return cls(o.model, o.revision, o.device, max_batch_size=o.max_batch_size, served_name=o.served_name,
                   config=config)

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
        max_batch_size: int | None = None,
        max_batch_tokens: int | None = None,
        config: HFConfig | None = None,
        strict: bool = False,
    ) -> HFEngine:
        """Wrap a model already built in memory (the random-weight true shapes)."""
        engine = cls.__new__(cls)
        encoder = PromptEncoder(tokenizer, preprocessor_config, model.config.image_token_id)
        engine._setup(model.eval(), encoder, name, revision, _sized(config, max_batch_size, max_batch_tokens), strict)
        return engine

    def _setup(self, model: Any, encoder: PromptEncoder, name: str, revision: str | None, config: HFConfig,
               strict: bool = False) -> None:
        if model.config.model_type != "qwen3_vl":
            raise ValueError(f"the hf engine runs Qwen3-VL checkpoints; got model_type {model.config.model_type!r}")
        merge = int(model.config.vision_config.spatial_merge_size)
        if encoder.merge != merge:  # positions and image tokens are counted with the processor's
            raise ValueError(f"preprocessor_config.json merges {encoder.merge}x{encoder.merge} patches, "
                             f"the model's vision config {merge}x{merge}")
        self.model = model
        self._config = config
        # The model's state: its ``config`` is the config in force, read by the installed forwards
        # at each call; shared with every engine made from this one (``with_config``), as the
        # model and its lock are.
        self._state = state_of(model)
        self._state.config = config
        fuse = compile_enabled(next(model.parameters()).device)
        qkv_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
        if fuse and config.op("vision_rotary"):  # compile_enabled: CUDA with Triton
            from benchcheck.engines.hf.kernels.vision_rotary_triton import qkv_rotary
        # Every fast path checked against this transformers before it is installed; what fell
        # back is one warning (or FastPathMismatch with ``strict``), and stays in the report. The
        # config's set-up ops leave theirs out (``SETUP_OPS``).
        off = {path for op, paths in SETUP_PATHS.items() if not config.op(op) for path in paths}
        self.fast_paths = install_fast_paths(model, fuse=fuse, strict=strict,
                                             paths=[p for p in fast_paths(qkv_rotary) if p.name not in off])
        installed = self.fast_paths.installed
        self._fused_attention = installed.get("fused_attention", 0) > 0
        # Scoring forwards can run the last decoder layer at the scored positions only (model.scored).
        self._scored_installed = installed.get("scored_last_layer", 0) > 0
        # The launching thread waits for the device without holding Python's lock (runtime.pacing);
        # its depth and whether it paces come from the config in force (``active``).
        self.pacer = use_paced_launches(model, config.pacing_depth)
        self.encoder = encoder
        self.tokenizer = encoder.tokenizer
        self.model_name = name
        self.revision = revision
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
        self._lock = threading.Lock()  # one forward at a time on the device (shared by ``with_config``)
        self._cancellations = Cancellations()  # generations whose clients left (``cancel``)
        # Variable-length tree attention: FlashAttention's kernel on CUDA in bf16/fp16, where op
        # ``varlen`` is on by default; elsewhere a per-sequence reference kernel, only when named
        # (``+varlen``: tests of the one-row plumbing on the CPU), else the dense tree mask (decision 007).
        self._varlen_installed = installed.get("tree_attention", 0) > 0
        self._varlen_fast = flash_available(self.device, self.dtype)
        self._collector_frozen = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-encode")  # replaced below
        self._stager_made = threading.Lock()  # guards the model's staging thread (``_stager``)
        self._configure(config, None)

    def _configure(self, config: HFConfig, before: HFEngine | None) -> None:
        """What follows from ``config`` for this engine object (at setup, or for ``with_config``'s
        copy of ``before``): the token budget, the decode graphs, the encoding threads, the image
        decoders and the frame memo (new ones only where the config changes them)."""
        self._config = config
        self.max_batch_tokens = _tokens_that_fit(self.model, config.max_batch_tokens)
        # A generation batch's K/V slots (op ``decode_together``; 0: as many as a scoring batch's tokens).
        self.decode_batch_tokens = (_kv_slots_that_fit(self.model, config.decode_batch_tokens, self.max_batch_tokens)
                                    if config.op("decode_together") else 0)
        # Generation's decode steps replayed as CUDA graphs (op ``decode_graphs``, decision 015):
        # only with the fused attention forward, the way to ``decode_attention``; the record also
        # counts captures and failures (per engine object).
        self.decode_graphs = DecodeGraphs(enabled=self._fused_attention and config.op("decode_graphs"),
                                          warm_once=config.op("decode_warm_once"))
        # Decode batches run, by their rows (two batches decoded together, op ``decode_join``, count as one).
        self.decode_rows: collections.Counter[int] = collections.Counter()
        old = before._config if before is not None else None
        if old is None or old.encode_threads != config.encode_threads:
            self._pool = ThreadPoolExecutor(max_workers=config.encode_threads, thread_name_prefix="hf-encode")
        processes = config.decode_processes if config.decode_processes is not None else decode_processes(self.device)
        decoding = (processes, config.op("decode_shm"), config.frame_memo_bytes)
        if old is None or decoding != (old.decode_processes if old.decode_processes is not None
                                       else decode_processes(self.device), old.op("decode_shm"), old.frame_memo_bytes):
            if old is not None:
                self.encoder = copy.copy(self.encoder)
            self.encoder.decoder = FrameDecoder(self.encoder.decoder.rule, processes, shared=config.op("decode_shm"))
            self.encoder.memo = FrameMemo(config.frame_memo_bytes)

    # -- the configuration -----------------------------------------------------------------

    @property
    def config(self) -> HFConfig:
        """Every knob of this engine (frozen; another config: ``with_config``)."""
        return self._config

    @property
    def config_hash(self) -> str:
        """``config.hash``: written beside engine, model and revision in rows and the run log."""
        return self._config.hash

    def with_config(self, config: HFConfig) -> HFEngine:
        """An engine on the same model, tokenizer and lock with another config (benchmarks compare
        fast paths so, in one process). The ops that install the model's forwards (``SETUP_OPS``)
        must stay as they are: the model is set up once."""
        if config == self._config:
            return self
        moved = [op for op in SETUP_OPS if config.op(op) != self._config.op(op)]
        if moved:
            raise ValueError(f"hf config: op {moved[0]!r} is chosen when the model is set up; "
                             "build another engine (HFEngine(..., config=...)) to change it")
        other = copy.copy(self)
        other._token_text = self._token_text  # shared cache: the same tokenizer
        other._collector_frozen = self._collector_frozen
        other._configure(config, self)
        return other

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The device to this engine for a block: the model's lock held, this engine's config in
        force on the model (read by its installed forwards) and its pacing set."""
        with self._lock:
            self._state.config = self._config
            if self.pacer is not None:
                self.pacer.enabled = self._config.op("pacing")
                self.pacer.depth = self._config.pacing_depth
            yield

    @property
    def share_prefixes(self) -> bool:
        """Scoring requests that start with the same tokens share them (op ``share_prefixes``)."""
        return self._config.op("share_prefixes")

    @property
    def tree_attention(self) -> str:
        """How a packed batch's tree attention runs: "varlen" (all families in one unpadded row,
        variable-length attention: CUDA in bf16/fp16, op ``varlen``) or "mask" (a left-padded row
        per family with a dense tree mask: everywhere else)."""
        return "varlen" if self._varlen_installed and self._config.op("varlen", self._varlen_fast) else "mask"

    @property
    def right_prefill(self) -> bool:
        """A generation batch whose rows differ in length is padded on the right (op
        ``right_prefill``): transformers runs a left-padded prefill with a mask, so SDPA's masked
        kernel over the whole square with K/V heads repeated, not its causal one."""
        return self._config.op("right_prefill")

    @property
    def unpadded_scoring(self) -> bool:
        """Short batches that share nothing scored in one unpadded row (op ``unpadded``; with "varlen")."""
        return self._config.op("unpadded")

    @property
    def scored_last_layer(self) -> bool:
        """The last decoder layer at the scored positions only (op ``scored_last_layer``, where installed)."""
        return self._scored_installed and self._config.op("scored_last_layer")

    @property
    def freeze_collector(self) -> bool:
        """``gc.freeze()`` after the first call (op ``freeze_gc``; by default on CUDA only, where the
        launching thread is what keeps the device busy; decision 027)."""
        return self._config.op("freeze_gc", self.device.type == "cuda")

    def plan_options(self) -> dict[str, Any]:
        """The config's say in how a packed row is built (``forward.packed.pack``)."""
        cfg = self._config
        return {"triton_max_keys": cfg.varlen_triton_max_keys if cfg.op("varlen_triton") else 0}

    # -- the Engine protocol -------------------------------------------------------------

    async def score(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]:
        """Top log-probs of the first answer token of each request (one forward each). Cancelled
        (Ctrl-C), the call stops at its next batch and raises ``CallCancelled`` with what it answered."""
        return await _stoppable(self.score_sync, reqs)

    async def generate(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]:
        """Greedy text of each request, up to its ``max_tokens``; cancelled, as ``score``."""
        # Cancellable from here, on the event loop, not only once a thread runs ``generate_sync``:
        # a client that leaves while the call waits for a thread would otherwise be forgotten.
        with self._cancellations.running([r.request_id for r in reqs]):
            return await _stoppable(self.generate_sync, reqs)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.encoder.decoder.close()
        self.encoder.memo.clear()
        with self._lock:  # the launching thread, if any, once its batch is done
            launcher, self._state.launcher = self._state.launcher, None
        if launcher is not None:
            launcher.close()
        with self._stager_made:
            stager, self._state.stager = self._state.stager, None
        if stager is not None:
            stager.shutdown(wait=False, cancel_futures=True)

    # -- blocking implementations --------------------------------------------------------

    def score_sync(self, reqs: Sequence[ScoreRequest], stop: threading.Event | None = None,
                   ) -> list[LetterScores | Failure]:
        """``score`` without the event loop (benchmarks, scripts). ``stop``, once set, ends the call
        at its next batch: ``schedule.pipeline.Stopped`` with the answers of the batches that landed."""
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
            def launch() -> PendingTop:
                if packed_row:
                    packed = pack(prompts, families, self.pad_id, self.pixels, self.dtype, one_row=varlen,
                                  **self.plan_options())
                    return score_packed(self.model, packed, k, gather_t, self.scored_last_layer)
                batch = collate(prompts, self.pad_id, self.pixels, self.dtype, right=True)
                return score_batch(self.model, batch, k, gather_t, self.scored_last_layer)

            with self.active():
                pending = self._launched(launch)
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
            return run_pipeline(jobs, self._encode, self._pool, self._plan(), run, share=self.share_prefixes,
                                stop=stop)
        finally:
            self._freeze_once()

    def _lookback(self) -> int:
        """Decode steps a finished flag is read late: the config's on CUDA, none elsewhere (a CPU
        step runs when queued; reading at once wastes nothing)."""
        return self._config.decode_lookback if self.device.type == "cuda" else 0

    def _launched(self, launch: Callable[[], T]) -> T:
        """``launch()`` on the model's own launching thread (``runtime.launcher``) where op
        ``launch_thread`` is on, else here; called under the model's lock, so that thread runs one
        batch at a time (decision 113)."""
        if not self._config.op("launch_thread", self.device.type == "cuda"):
            return launch()
        if self._state.launcher is None:
            self._state.launcher = Launcher(self.device)
        return self._state.launcher.run(launch)

    def _stager(self) -> ThreadPoolExecutor:
        """The model's staging thread (op ``stage_ahead``), made on first use, with the model's
        CUDA device current there (its page-locked buffers are allocated in that device's context)."""
        device = self.device

        def on_device() -> None:
            if device.type == "cuda":
                torch.cuda.set_device(device)

        with self._stager_made:
            if self._state.stager is None:
                self._state.stager = ThreadPoolExecutor(1, thread_name_prefix="hf-stage", initializer=on_device)
            return self._state.stager

    def _plans(self) -> PlanMemo | None:
        """The model's cuDNN plan memo where op ``new_shape_flash`` is on (its limit the config's),
        else None. Called under the model's lock: the memo is the model's, the config in force."""
        if not self._config.op("new_shape_flash", self.device.type == "cuda"):
            return None
        plans = self._state.plans
        plans.max_flops = self._config.new_shape_flash_gflops * 1e9
        return plans

    def generate_sync(self, reqs: Sequence[GenerateRequest], stop: threading.Event | None = None,
                      ) -> list[Generation | Failure]:
        """``generate`` without the event loop; ``stop`` as ``score_sync``'s, and a batch being
        decoded when it is set stops at its next step, its requests unanswered (never cut text)."""
        jobs = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, r.system, r.max_tokens) for r in reqs]
        # Batches staged ahead (op ``stage_ahead``): id -> (the batch, its host inputs being built).
        staging = self._config.op("stage_ahead", self.device.type == "cuda")
        staged: dict[int, tuple[PlannedBatch, Future[list[HostBatch] | HostBatch]]] = {}
        # Op ``decode_join``: a batch followed by more of the call's requests is prefilled and held
        # (at most one at a time); the next batch joins it where both fit, else it decodes alone.
        holding = _Holding(self._config.op("decode_join", self.device.type == "cuda")
                           and bool(self.decode_batch_tokens) and self.right_prefill,
                           len(reqs), self.decode_batch_tokens, self._config.max_batch_size)

        def host_inputs(prompts: list[EncodedPrompt]) -> list[HostBatch] | HostBatch:
            """A batch's inputs on the host. A batch planned by its K/V slots (op
            ``decode_together``) prefills its rows in groups of at most max_batch_tokens, padded on
            the right; one group runs as any batch, on the right where its rows are unequal."""
            groups = prefill_groups([p.n_tokens for p in prompts], self.max_batch_tokens)
            if len(groups) > 1:
                return [stage([prompts[j] for j in g], self.device, self.pad_id, right=True) for g in groups]
            right = self.right_prefill and len({p.n_tokens for p in prompts}) > 1
            return stage(prompts, self.device, self.pad_id, right=right)

        def stopped(ids: list[str]) -> Callable[[], Sequence[bool] | None]:
            """The decode loop's question before each step: the rows whose clients left, or every
            row once the call is told to stop."""
            left = self._cancellations.watcher(ids)
            if stop is None:
                return left
            every = [True] * len(ids)
            return lambda: every if stop.is_set() else left()

        def stage_ahead(planned: PlannedBatch, enc: list[Encoded]) -> None:
            # A staging thread shut down (``aclose``) takes nothing more: the batch builds its own.
            with contextlib.suppress(RuntimeError):
                staged[id(planned)] = (planned, self._stager().submit(host_inputs, [e.prompt for e in enc]))

        def alone(held: Prefilled, ids: list[str]) -> Callable[[], list[list[int]]]:
            """A held batch that no batch joined, decoded by itself (its first rows: a joining batch
            whose own decode failed is left out)."""
            with self.active():
                return self._launched(lambda: decode(held, ids, rows=len(ids)))

        def decode(held: Prefilled, ids: list[str], rows: int | None = None) -> Callable[[], list[list[int]]]:
            """Queue the decode of ``held``'s first ``rows`` rows (all by default); the function that reads them."""
            n = rows or held.prefilled
            read = held.decode(self.stop_ids, self.pad_id, self.decode_graphs, self.pacer, self._lookback(),
                               self._config.op("decode_planless"), stopped(ids), rows=rows)
            self.decode_rows[n] += 1
            return read

        def run(planned: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[Generation | Failure]]:
            idx = planned.idx
            ids = [reqs[i].request_id for i in idx]
            max_new = [reqs[i].max_tokens for i in idx]
            prompts = [e.prompt for e in enc]
            joins, hold = holding.take(idx, enc)
            # Timed from here: a held batch decoded alone by ``take`` is that batch's time, not this one's.
            t0 = time.perf_counter()
            ahead = staged.pop(id(planned), None)
            inputs: Callable[[], list[HostBatch] | HostBatch] = partial(host_inputs, prompts)
            if ahead is not None and ahead[0] is planned:
                inputs = partial(_staged_or_built, ahead[1], inputs)
            elif staging:  # a batch not staged ahead (a call's first) is staged before the lock:
                built = host_inputs(prompts)  # another call's batches may be running meanwhile
                inputs = lambda: built  # noqa: E731

            def launch() -> Callable[[], list[list[int]]] | Prefilled:
                host = inputs()
                batch = ([upload(h, self.pixels, self.dtype) for h in host] if isinstance(host, list)
                         else upload(host, self.pixels, self.dtype))
                if joins is not None:
                    joins.prefilled.join(batch, max_new)
                    return decode(joins.prefilled, joins.ids + ids)
                if hold:
                    return prefill(self.model, batch, max_new, self.decode_graphs, self._plans(),
                                   self.scored_last_layer, apart=True)
                read = greedy_start(self.model, batch, max_new, self.stop_ids, self.pad_id,
                                    graphs=self.decode_graphs, pacer=self.pacer, lookback=self._lookback(),
                                    planless=self._config.op("decode_planless"), plans=self._plans(),
                                    stopped=stopped(ids), scored_only=self.scored_last_layer)
                if max(max_new, default=0) > 0:
                    self.decode_rows[len(idx)] += 1
                return read

            joined_out_of_memory = False
            try:
                with self.active():
                    launched = self._launched(launch)
            except torch.cuda.OutOfMemoryError:
                if joins is None or joins.read is not None:
                    raise
                # Handled below, once the exception, and the failed attempt's tensors it holds, are gone.
                joined_out_of_memory = True
            except BaseException:
                if joins is not None and joins.read is None:
                    # The joining batch failed: the held one decodes alone now, so that its
                    # reservation is not still held while the next batch reserves its own.
                    with contextlib.suppress(RuntimeError, ValueError):
                        joins.alone()
                raise
            if joined_out_of_memory:
                assert joins is not None
                with contextlib.suppress(RuntimeError, ValueError):
                    joins.alone()
                # Too large together; by itself it may fit, as it would have without the op (given
                # again, it is neither held nor joined).
                torch.cuda.empty_cache()
                return run(planned, enc)
            if isinstance(launched, Prefilled):  # held for the next batch to join: decoded with it, or alone
                mine = holding.held = _Held(launched, enc, ids, t0, partial(alone, launched, ids))
                return partial(built_results, idx, enc, lambda: mine.tokens()[: len(ids)], lambda: mine.ended - mine.t0)
            # Timed when the decode loop ends, not when the tokens are read: the pipeline queues the
            # next batch first, and that batch's time is not this one's (the steps still queued are
            # at most the look-back's; a loop that never waited for the device has read already).
            dt = time.perf_counter() - t0
            if joins is not None:
                joins.decoded(launched)
                n = len(joins.ids)
                return partial(built_results, idx, enc, lambda: joins.tokens()[n:], lambda: dt)
            return partial(built_results, idx, enc, launched, lambda: dt)

        def built_results(idx: list[int], enc: list[Encoded], read: Callable[[], list[list[int]]],
                          took: Callable[[], float]) -> list[Generation | Failure]:
            tokens = read()
            if stop is not None and stop.is_set():
                raise BatchCut  # its decode may have stopped early: a cut text is no answer
            return [
                Generation(
                    request_id=reqs[i].request_id,
                    text=self.tokenizer.decode(toks, skip_special_tokens=True),
                    prompt_tokens=e.prompt.n_tokens,
                    completion_tokens=len(toks),
                    latency_s=took() + e.encode_s,
                    model=self.model_name,
                )
                for i, e, toks in zip(idx, enc, tokens, strict=True)
            ]

        try:
            with self._cancellations.running([r.request_id for r in reqs]):
                return run_pipeline(jobs, self._encode, self._pool, self._plan(), run,
                                    stage=stage_ahead if staging else None, stop=stop)
        finally:
            self._freeze_once()

    def cancel(self, request_ids: Iterable[str]) -> None:
        """Stop generating these requests (their clients went away): rows being decoded finish
        at their next step, as at a stop token; ids not being generated are ignored."""
        self._cancellations.cancel(request_ids)

    # -- helpers -------------------------------------------------------------------------

    def _freeze_once(self) -> None:
        """``gc.freeze()`` after the engine's first call, if ``freeze_collector``: the libraries', the
        model's and the compilers' objects then leave the collector's full scans (decision 027)."""
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
        cfg = self._config
        return Plan(cfg.max_batch_size, self.max_batch_tokens, cfg.sort_window, cfg.chunk_growth, cfg.first_chunk,
                    self.one_row_limit(), cfg.op("share_frames"), self.decode_batch_tokens)

    def one_row_limit(self) -> int:
        """The longest prompt of a batch sharing nothing that still runs unpadded in one row (0: none)."""
        return self._config.unpadded_max_tokens if self.unpadded_scoring and self.tree_attention == "varlen" else 0

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


@dataclasses.dataclass(slots=True)
class _Held:
    """A generation batch prefilled and held for the next batch to join (op ``decode_join``): its
    encodings and request ids, when it started, and how to decode it alone (``alone``: the next
    batch did not fit, or failed first); once decoded, the function reading every row's tokens
    (the joined batch's after its own) and when its decode loop ended."""

    prefilled: Prefilled
    enc: list[Encoded]
    ids: list[str]
    t0: float
    by_itself: Callable[[], Callable[[], list[list[int]]]]
    read: Callable[[], list[list[int]]] | None = None
    ended: float = 0.0
    _tokens: list[list[int]] | None = None

    def decoded(self, read: Callable[[], list[list[int]]]) -> None:
        self.read, self.ended = read, time.perf_counter()

    def alone(self) -> None:
        self.decoded(self.by_itself())

    def tokens(self) -> list[list[int]]:
        """Every decoded row's tokens, read once; decoded alone first if no batch joined it."""
        if self.read is None:
            self.alone()
        if self._tokens is None:
            assert self.read is not None
            self._tokens = self.read()
        return self._tokens


@dataclasses.dataclass(slots=True)
class _Holding:
    """Op ``decode_join`` in one generation call (``on``): the batch held for the next to join, if
    any, and the requests given to batches so far, of the call's ``total`` (some of the rest may
    fail to encode); ``budget`` and ``most`` are the K/V slots and rows one decode may hold."""

    on: bool
    total: int
    budget: int
    most: int
    held: _Held | None = None
    given: set[int] = dataclasses.field(default_factory=set)

    def take(self, idx: list[int], enc: list[Encoded]) -> tuple[_Held | None, bool]:
        """For the batch of requests ``idx`` about to run: the held batch it joins, and whether it
        is held itself (while more requests follow and one more row would fit beside it). A held
        batch it does not join is decoded alone first (if that fails, it is tried again when
        landed, and fails or is split as its own batch, not as this one). A batch given before
        (half of one split after it ran out of device memory) runs by itself, neither held nor
        joining: joined, it could rebuild the decode that ran out."""
        again = not self.given.isdisjoint(idx)
        self.given.update(idx)
        joins, self.held = self.held, None
        if joins is not None and (again or not join_fits(joins.enc, enc, self.budget, self.most)):
            with contextlib.suppress(RuntimeError, ValueError):
                joins.alone()
            joins = None
        hold = self.on and not again and joins is None and len(self.given) < self.total \
            and join_fits(enc, [], self.budget, self.most)
        return joins, hold


async def _stoppable(call: Callable[[Sequence[Q], threading.Event], list[A | Failure]],
                     reqs: Sequence[Q]) -> list[A | Failure]:
    """``call(reqs, stop)`` in a worker thread. A thread cannot be cancelled: cancelled here (Ctrl-C
    cancels the run's tasks), the call is told to stop at its next batch and awaited to its end
    (however often it is cancelled meanwhile: the model's lock and the device are free when this
    returns, and the process exits then, not when the call would have ended); ``CallCancelled``
    then carries what it answered, and the cancellation goes on. The thread's future is a plain
    one, not a task: the event loop's shutdown cancels every task, and would take its result."""
    stop = threading.Event()
    work = asyncio.get_running_loop().run_in_executor(None, call, reqs, stop)
    cancelled = False
    while not work.done():
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError:
            stop.set()
            cancelled = True
    if not cancelled:
        return work.result()
    try:
        done: Sequence[object | None] = work.result()
    except Stopped as e:
        done = e.done
    except Exception:  # the call failed meanwhile: nothing of it is an answer
        done = [None] * len(reqs)
    raise CallCancelled(done)


def _staged_or_built(staged: Future[T], build: Callable[[], T]) -> T:
    """A batch's inputs staged ahead, or built now where their staging was cancelled (the engine
    closed meanwhile): the batch runs or fails on its own, never the whole call."""
    try:
        return staged.result()
    except CancelledError:
        return build()


def _sized(config: HFConfig | None, max_batch_size: int | None, max_batch_tokens: int | None) -> HFConfig:
    """``config`` (default: the defaults) with the batch limits given as arguments."""
    cfg = config or HFConfig()
    if max_batch_size is not None:
        cfg = dataclasses.replace(cfg, max_batch_size=max_batch_size)
    if max_batch_tokens is not None:
        cfg = dataclasses.replace(cfg, max_batch_tokens=max_batch_tokens)
    return cfg
