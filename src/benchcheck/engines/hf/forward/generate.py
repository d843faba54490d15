"""Greedy generation of the ``hf`` engine: one prefill, then one token a step, the device never waited on.

The sweep's requests are long (582 frames: ~54,000 prompt tokens) and generate 128 tokens, so
the decode steps are most of their time. transformers' loop made each step slow three ways, all
on the host's side or in copies (H200, 8B: ~70 ms a step against ~9 ms of useful device work):

- ``DynamicCache`` concatenates each step's keys and values onto the cache, copying all of it
  (at 54,000 tokens 8 GB for one 8B row, read and written again per step). ``ReservedCache``
  reserves the prompt's and every new token's slots once and writes each step into its slot.
- The loop read the new tokens back every step (``.tolist()``), so the host queued step s+1 only
  after the device had finished step s. Here tokens and stop flags stay on the device; whether
  every row has finished is copied back without waiting and read ``lookback`` steps later
  (``FinishWatch``): the host waits only for the step that far back, with Python's lock released,
  which also bounds how far it runs ahead.
- A step can have the same shapes every time: it attends over the whole reservation with a mask
  of the slots written so far and writes its keys at a slot held in a device tensor (left-padded
  batches and replayed steps decode so; a batch without padding run eagerly appends and needs no
  mask). On CUDA such a step can
  be captured once as a CUDA graph and replayed, one launch instead of ~1,000 kernels' worth of
  Python; a capture that fails runs the step eagerly and turns graphs off for the engine (one
  warning). On by default (``HFEngine.decode_graphs``): on the H200 the sweep's 8B requests
  (54,000 prompt tokens, 128 new) took 5.3 s an item replayed against 10.5 s eagerly. A step is
  warmed up eagerly before its capture only for a row count not yet captured (op
  ``decode_warm_once``); a capture without the warm-up that fails is warmed and captured again,
  and from then on every capture warms up (one warning).

The tokens and every step's logits are those of each request decoded alone by recomputing its
whole sequence each step (tests/engines_hf/forward/test_hf_generate.py, float32).
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from benchcheck.engines.hf.attention.cache import ReservedCache, ReservedLayer, reserved_slots
from benchcheck.engines.hf.attention.sdpa import PLANS_KWARG, PlanMemo, decode_kernels
from benchcheck.engines.hf.attention.varlen import NAME as VARLEN_NAME
from benchcheck.engines.hf.config import DEFAULTS
from benchcheck.engines.hf.forward.batch import Batch, last_real, position_ids
from benchcheck.engines.hf.model.scored import Scored, installed
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.runtime.pacing import LaunchPacer
from benchcheck.engines.hf.runtime.transfer import pinned_empty, to_device
from benchcheck.errors import first_line

log = logging.getLogger(__name__)

# Decode steps a batch must have for them to be captured as a CUDA graph (``greedy_batch``).
MIN_REPLAYED_STEPS = 4


@dataclass(slots=True)
class _StepInputs:
    """A decode step's inputs, in tensors that keep their storage (a CUDA graph reads them there)."""

    ids: torch.Tensor  # (B, 1) long
    positions: torch.Tensor  # (4, B, 1) long: text, then M-RoPE (t, h, w)
    slot: torch.Tensor  # (1,) long: the cache slot this step writes
    mask: torch.Tensor  # (B, 1, 1, capacity) bool


@dataclass(slots=True)
class DecodeGraphs:
    """Whether an engine's decode steps are replayed as CUDA graphs (``enabled``), and how often a
    step was captured or failed to be. The first failure turns graphs off for the engine's life,
    with one warning: every later batch would fail the same way, paying a warm-up each time."""

    enabled: bool = False
    captured: int = 0
    failed: int = 0
    # The last graph captured: the next capture shares its memory pool (``CUDAGraph.pool``), so
    # the blocks of a batch's step serve the next batch's too (a batch's graph is never replayed
    # once the next one is captured); the pool lives as long as the engine.
    last: torch.cuda.CUDAGraph | None = None
    # Every warm-up and capture on one side stream: the allocator reuses a free block only for
    # the stream it was allocated on, so captures on rotating streams would not share the pool.
    stream: Any = None
    # For checks: fixed-shape steps (the graphs' kernels) even where no graph is captured, so a
    # graph's tokens can be compared with the same kernels run eagerly.
    fixed_steps: bool = False
    # Op ``decode_warm_once``: a step is captured without its eager warm-up once a step of as
    # many rows was warmed and captured here (its kernels chosen, compiled and tuned); ``warmed``
    # holds those row counts.
    warm_once: bool = False
    warmed: set[int] = field(default_factory=set)
    unwarmed_failed: int = 0  # captures without a warm-up that failed (the first turns the op off)

    def capture_stream(self) -> torch.cuda.Stream:
        """The side stream of every warm-up and capture (created at the first)."""
        if self.stream is None:
            self.stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        stream: torch.cuda.Stream = self.stream
        return stream

    def replays_on(self, device: torch.device) -> bool:
        """Whether steps on ``device`` are captured and replayed (CUDA graphs: CUDA only)."""
        return self.enabled and device.type == "cuda"

    def unwarmed_failure(self, reason: str) -> None:
        """A capture without its warm-up failed: captures warm up again from now on (one warning)."""
        self.unwarmed_failed += 1
        if self.warm_once:
            log.warning("decode steps are warmed up before every capture from now on: a capture without its "
                        "warm-up failed (%s)", reason)
        self.warm_once = False

    def failure(self, reason: str) -> None:
        self.failed += 1
        if self.enabled:
            log.warning("decode steps run eagerly from now on: capturing one as a CUDA graph failed (%s)", reason)
        self.enabled = False


class DecodeStep:
    """One decode step of ``model`` over a ``ReservedCache``: eager, or, given ``graphs`` (where the
    caller replays: CUDA, ``greedy_batch``), captured once as a CUDA graph and replayed, the capture
    counted there. Either way the same kernels read the same inputs."""

    def __init__(self, model: Any, cache: ReservedCache, inputs: _StepInputs, graphs: DecodeGraphs | None,
                 pacer: LaunchPacer | None = None) -> None:
        self.model, self.cache, self.inputs, self.graphs, self.pacer = model, cache, inputs, graphs, pacer
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None
        self.try_graph = graphs is not None

    def _forward(self) -> torch.Tensor:
        # Fixed shapes (the cache decoding at its slot): the mask of the written slots. Otherwise
        # the cache appends and returns what is written, all of which a step may see: no mask.
        mask = self.inputs.mask if self.cache.decoding else None
        out = self.model(input_ids=self.inputs.ids, attention_mask=mask,
                         position_ids=self.inputs.positions, past_key_values=self.cache, use_cache=True)
        logits: torch.Tensor = out.logits[:, -1, :]
        return logits

    def __call__(self) -> torch.Tensor:
        """The step's last-position logits (B, vocab); with a graph, a tensor the next call overwrites."""
        if self.graph is not None:
            self.graph.replay()
            assert self.logits is not None
            return self.logits
        if self.try_graph:
            self.try_graph = False
            captured = self._capture()
            if captured is not None:
                return captured
        return self._forward()

    def _capture(self) -> torch.Tensor | None:
        """Capture the step (its first call runs it); None when capture failed (run it eagerly)."""
        assert self.graphs is not None
        rows = int(self.inputs.ids.shape[0])
        if self.graphs.warm_once and rows in self.graphs.warmed:
            try:
                return self._captured(warm=False)
            except torch.cuda.OutOfMemoryError:
                raise
            except RuntimeError as e:
                # Something still needed a first run at this shape: warmed up, as any first
                # capture, and every later one too (each failure drains the device).
                torch.cuda.synchronize()
                self.graphs.unwarmed_failure(first_line(e) or type(e).__name__)
        try:
            logits = self._captured(warm=True)
        except torch.cuda.OutOfMemoryError:
            raise  # the batch is too large: the pipeline splits it, as for any forward
        except RuntimeError as e:
            torch.cuda.synchronize()
            self.graphs.failure(first_line(e) or type(e).__name__)
            return None
        self.graphs.warmed.add(rows)
        return logits

    def _captured(self, warm: bool) -> torch.Tensor:
        """The step captured (after an eager warm-up with ``warm``) and replayed once: its logits."""
        assert self.graphs is not None
        paced = self.pacer is not None and self.pacer.enabled
        if self.pacer is not None:
            self.pacer.enabled = False  # its event waits may not run inside a capture
        try:
            # The warm-up runs on a side stream, as torch.cuda.graphs asks: it computes this very
            # step (same inputs, same slot), so its writes to the cache are the step's own.
            side = self.graphs.capture_stream()
            side.wait_stream(torch.cuda.current_stream())
            graph = torch.cuda.CUDAGraph()
            try:
                # The warm-up and the capture take the compiled small-row paths (op graph_fused):
                # the warm-up compiles what the capture launches.
                with torch.cuda.stream(side), graph_kernels(self.model):
                    if warm:
                        self._forward()
                    # Captured on the side stream without ``torch.cuda.graph``'s set-up: it waits
                    # for the device to drain and empties the allocator's device and page-locked
                    # caches, so the capture's host time could not overlap the prefill still
                    # running, and the next batch allocated everything afresh (decision 108).
                    # Only this thread's calls are checked: another engine call's thread may wait
                    # on its own events meanwhile, which the default (global) mode would turn into
                    # an error there.
                    shared = None if self.graphs.last is None else self.graphs.last.pool()
                    graph.capture_begin(shared, capture_error_mode="thread_local")
                    try:
                        logits = self._forward()
                    except BaseException:
                        with contextlib.suppress(RuntimeError):  # the step's own error is the one to see
                            graph.capture_end()
                        raise
                    graph.capture_end()
            finally:
                # Even after a failure, what the current stream runs next follows the warm-up's
                # writes to the cache (whose blocks belong to the current stream).
                torch.cuda.current_stream().wait_stream(side)
        finally:
            if self.pacer is not None:
                self.pacer.enabled = paced
        self.graphs.captured += 1
        self.graphs.last = graph
        self.graph, self.logits = graph, logits
        graph.replay()
        return logits


@contextlib.contextmanager
def graph_kernels(model: Any, on: bool = True) -> Iterator[None]:
    """With ``on``: the block's forwards run as a step being captured as a CUDA graph does (the
    model state's ``graph_step``: with op ``graph_fused`` the compiled small-row paths)."""
    if not on:
        yield
        return
    state = state_of(model)
    state.graph_step = True
    try:
        yield
    finally:
        state.graph_step = False


class FinishWatch:
    """Whether every row had finished ``lookback`` steps ago, read without waiting for the device
    meanwhile: each step's "all finished" flag is copied back (on CUDA to page-locked memory,
    without waiting) and read ``lookback`` steps later, when the host waits, with Python's lock
    released, for that old step alone. With ``lookback`` 0 the flag is read at once."""

    def __init__(self, device: torch.device, lookback: int) -> None:
        self.cuda = device.type == "cuda"
        self.lookback = lookback
        # A ring of flags: the one written at step s is read at step s + lookback, then reused.
        self.flags = [torch.zeros((), dtype=torch.bool, pin_memory=self.cuda) for _ in range(lookback + 1)]
        self.events: deque[tuple[torch.Tensor, torch.cuda.Event | None]] = deque()
        self.step = 0

    def finished(self, done: torch.Tensor) -> bool:
        self.step += 1
        if self.lookback == 0:
            return bool(done.all())
        flag = self.flags[(self.step - 1) % len(self.flags)]
        flag.copy_(done.all(), non_blocking=self.cuda)
        self.events.append((flag, torch.cuda.current_stream().record_event() if self.cuda else None))
        if len(self.events) <= self.lookback:
            return False
        old, event = self.events.popleft()
        if event is not None:
            event.synchronize()
        return bool(old)

    @property
    def waited(self) -> bool:
        """Whether a flag was read: the device had reached that step."""
        return self.step > self.lookback


def _prefill(model: Any, batch: Batch, pos: torch.Tensor, cache: ReservedCache,
             plans: PlanMemo | None, scored_only: bool = False) -> torch.Tensor:
    """The prefill of ``batch`` (its ``position_ids``: ``pos``) into ``cache``: (B, vocab) logits
    at each row's last real token. With ``scored_only`` (right padding or none, ``model.scored``
    installed) the last decoder layer fills the cache and runs the rest at those tokens alone."""
    memo: dict[str, Any] = {}
    if plans is not None:  # reaches the vision tower's and the language model's attention calls
        plans.forward()
        memo[PLANS_KWARG] = plans
    if _laid_right(batch) and scored_only and installed(model):
        scored = Scored.right_padded(batch.lengths, batch.input_ids.shape[1], pos.device)
        hidden = model.model(**batch.model_kwargs(model), position_ids=pos, use_cache=True, past_key_values=cache,
                             scored=scored, **memo).last_hidden_state[0]
        return model.lm_head(hidden[:, None, :])[:, -1, :]  # type: ignore[no-any-return]
    if batch.right:
        # No mask: SDPA's causal kernel, grouped K/V heads as they are. A pad after a row's last
        # token changes nothing before it, and the steps' mask leaves the pads out.
        states = model.model(**batch.model_kwargs(model), position_ids=pos, use_cache=True,
                             past_key_values=cache, **memo).last_hidden_state
        return model.lm_head(last_real(batch, states)[:, None, :])[:, -1, :]  # type: ignore[no-any-return]
    logits = model(**batch.model_kwargs(model), position_ids=pos, logits_to_keep=1, use_cache=True,
                   past_key_values=cache, **memo).logits
    return logits[:, -1, :]  # type: ignore[no-any-return]


def kv_shape(model: Any) -> tuple[int, int]:
    """(K/V heads, head size) of the language model's attention."""
    t = model.config.text_config
    return int(t.num_key_value_heads), int(getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads)


def check_attention(model: Any) -> None:
    """Decode steps pass a (B, 1, 1, S) bool mask, which only SDPA-style attention reads as such
    (transformers' eager attention would add it; FlashAttention takes no 4-D mask)."""
    impl = model.config.text_config._attn_implementation
    if impl not in ("sdpa", VARLEN_NAME):
        raise ValueError(f"generation needs the model's text attention to be SDPA, not {impl!r}")


def greedy_batch(model: Any, batch: Batch | Sequence[Batch], max_new: list[int], stop_ids: set[int], pad_id: int,
                 graphs: DecodeGraphs | None = None, pacer: LaunchPacer | None = None,
                 lookback: int | None = None, planless: bool = False, plans: PlanMemo | None = None,
                 scored_only: bool = False) -> list[list[int]]:
    """``greedy_start``'s tokens, waited for."""
    return greedy_start(model, batch, max_new, stop_ids, pad_id, graphs, pacer, lookback, planless, plans,
                        scored_only=scored_only)()


@torch.inference_mode()
def greedy_start(model: Any, batch: Batch | Sequence[Batch], max_new: list[int], stop_ids: set[int], pad_id: int,
                 graphs: DecodeGraphs | None = None, pacer: LaunchPacer | None = None,
                 lookback: int | None = None, planless: bool = False,
                 plans: PlanMemo | None = None,
                 stopped: Callable[[], Sequence[bool] | None] | None = None,
                 scored_only: bool = False) -> Callable[[], list[list[int]]]:
    """Greedy decoding of a padded batch (on the left, or on the right: ``collate(right=True)``);
    row r stops at a stop token or after ``max_new[r]`` tokens. Several batches (each padded on
    the right, or unpadded) are prefilled one after another into one cache and then decoded together, their
    rows in order: rows too long to prefill in one forward still share the decode steps, which
    read every weight once a step whatever the rows (op ``decode_together``). Returns the function that reads
    each row's new tokens, stop token excluded: the loop ends with the last ``lookback`` steps
    still queued (it has waited for the step before them), and a caller that queues its next
    batch before reading keeps the device busy meanwhile; a loop that never waited (a step or
    two) reads before it returns. ``graphs``: replay decode steps as a CUDA graph where enabled;
    ``lookback``: steps between a finished flag and its reading (default
    ``HFConfig.decode_lookback`` on CUDA, 0 elsewhere; one step queued while the host waits keeps
    the device busy whenever queuing a step takes the host less time than the step takes the
    device, and each further step of look-back is a step wasted after a stop); ``planless``: the
    decode steps' attention never on SDPA's cuDNN kernel (``attention.sdpa.decode_kernels``);
    ``plans``: the prefill's small new attention shapes run without building a cuDNN plan
    (``attention.sdpa.PlanMemo``, op ``new_shape_flash``); ``stopped``: asked before each step,
    the rows to stop now (their clients went away) or None when nothing changed: they finish as at
    a stop token, and a batch whose rows are all stopped ends; ``scored_only``: a prefill padded on
    the right runs the last decoder layer's queries, attention and MLP at each row's last real
    token alone (op ``scored_last_layer``, ``model.scored``; a batch without padding too). See the
    module's docstring. ``prefill`` and ``Prefilled.decode`` are its two halves."""
    if max(max_new, default=0) <= 0:
        check_attention(model)
        return lambda: [[] for _ in max_new]
    held = prefill(model, batch, max_new, graphs, plans, scored_only)
    return held.decode(stop_ids, pad_id, graphs, pacer, lookback, planless, stopped)


def _laid_right(b: Batch) -> bool:
    """Rows laid out as a right-padded batch's (padded on the right, or not padded): they can share
    a reservation with other rows, and their prefill may score the last layer at their last tokens."""
    return b.right or min(b.lengths, default=0) == b.input_ids.shape[1]


def _reservation(model: Any, rows: int, capacity: int, device: torch.device) -> ReservedCache:
    """A reservation of ``rows`` rows of ``capacity`` slots, allocated now (rows prefilled apart)."""
    cache = ReservedCache(model.config.text_config.num_hidden_layers, capacity)
    cache.reserve(rows, kv_shape(model), model.lm_head.weight.dtype, device)
    return cache


@torch.inference_mode()
def prefill(model: Any, batch: Batch | Sequence[Batch], max_new: list[int], graphs: DecodeGraphs | None = None,
            plans: PlanMemo | None = None, scored_only: bool = False, apart: bool = False) -> Prefilled:
    """``greedy_start``'s first half: ``batch`` prefilled into a reserved cache, not yet decoded.
    With ``apart`` (and always for several batches, each padded on the right or not padded) its
    rows are laid out so that another batch may join them before the decode
    (``Prefilled.join``): each step reads every weight once whatever its rows, so two batches
    decoded together read them once where apart they read them twice."""
    check_attention(model)
    steps = max(max_new, default=0)
    if steps <= 0:
        raise ValueError("a prefill for decoding needs a request with new tokens")
    parts = list(batch) if not isinstance(batch, Batch) else [batch]
    apart = apart or not isinstance(batch, Batch)
    if apart and not all(_laid_right(b) for b in parts):
        raise ValueError("batches prefilled apart are padded on the right")
    rows = sum(len(b.lengths) for b in parts)
    length = max(b.attention_mask.shape[1] for b in parts)
    dev = parts[0].input_ids.device
    lengths = [n for b in parts for n in b.lengths]
    # Steps of one shape (a graph needs it; left padding needs a mask anyway): the whole
    # reservation attended with the mask of the written slots. A batch without padding, run
    # eagerly, instead appends and attends over what is written with no mask, on SDPA's fastest
    # kernels (split over the keys).
    replay = _replays(graphs, dev, steps)
    fixed = apart or min(lengths) < length or replay or (graphs is not None and graphs.fixed_steps)
    # The last token is never fed back, so the prompt and steps - 1 new tokens fill the cache.
    # (Every row reserves the batch's longest prompt plus its largest max_new, as the planner
    # counts it: ``schedule.pipeline.row_slots``.)
    capacity = length + steps - 1
    if fixed:
        capacity = reserved_slots(capacity)  # decode_attention's value blocks
    cache = (_reservation(model, rows, capacity, dev) if apart
             else ReservedCache(model.config.text_config.num_hidden_layers, capacity))
    held = Prefilled(model, cache, capacity, rows, length, steps, fixed, apart, plans, scored_only)
    held.add(parts, max_new)
    return held


def _replays(graphs: DecodeGraphs | None, dev: torch.device, steps: int) -> bool:
    """Whether a batch's decode steps are captured and replayed: a capture costs about two eager
    steps of host time (its warm-up, then the capture), so only a batch with a few steps to
    replay is (``steps - 1`` step calls follow the prefill)."""
    return graphs is not None and graphs.replays_on(dev) and steps - 1 >= MIN_REPLAYED_STEPS


class Prefilled:
    """Rows prefilled into one reserved K/V cache and not yet decoded (``prefill``): another
    batch may join them (``join``); ``decode`` then decodes every row, in order."""

    def __init__(self, model: Any, cache: ReservedCache, capacity: int, reserved: int, length: int, steps: int,
                 fixed: bool, apart: bool, plans: PlanMemo | None, scored_only: bool) -> None:
        self.model, self.capacity = model, capacity
        # None once decoded: the reservation is freed as soon as the decode loop is queued, as a
        # batch's own is (the next batch's reservation may take its memory).
        self.cache: ReservedCache | None = cache
        # Rows the reservation holds: a join that failed after it grew the reservation leaves more
        # than were prefilled.
        self.reserved = reserved
        self.length, self.steps = length, steps
        self.fixed, self.apart, self.plans, self.scored_only = fixed, apart, plans, scored_only
        self.firsts: list[torch.Tensor] = []
        self.masks: list[torch.Tensor] = []  # each part's own attention mask (bool), padded at the decode
        self.nexts: list[torch.Tensor] = []
        self.max_new: list[int] = []
        self.prefilled = 0  # rows prefilled so far (the first rows of the reservation)

    @torch.inference_mode()
    def join(self, batch: Batch | Sequence[Batch], max_new: list[int]) -> None:
        """``batch`` (padded on the right or not padded) prefilled beside the rows here, to be
        decoded with them: the rows here are copied into a reservation that holds both (their
        keys and values once more in memory while copied), then theirs is freed."""
        parts = list(batch) if not isinstance(batch, Batch) else [batch]
        if not self.apart or not all(_laid_right(b) for b in parts):
            raise ValueError("only batches padded on the right join rows prefilled apart")
        assert self.cache is not None, "rows join a reservation before its decode"
        n = sum(len(b.lengths) for b in parts)
        length = max(self.length, *(b.attention_mask.shape[1] for b in parts))
        steps = max(self.steps, *max_new)
        capacity = reserved_slots(length + steps - 1)
        grown = _reservation(self.model, self.prefilled + n, capacity, parts[0].input_ids.device)
        for old, new in zip(self.cache.layers, grown.layers, strict=True):
            assert isinstance(old, ReservedLayer) and isinstance(new, ReservedLayer)
            assert old.keys is not None and old.values is not None and new.keys is not None
            assert new.values is not None
            new.keys[: self.prefilled, :, : self.capacity] = old.keys[: self.prefilled]
            new.values[: self.prefilled, :, : self.capacity] = old.values[: self.prefilled]
        self.cache, self.reserved = grown, self.prefilled + n
        self.capacity, self.length, self.steps = capacity, length, steps
        self.add(parts, max_new)

    def add(self, parts: list[Batch], max_new: list[int]) -> None:
        for part in parts:
            n = len(part.lengths)
            pos = position_ids(part)
            lo = self.prefilled
            assert self.cache is not None, "rows join a reservation before its decode"
            into = self.cache.rows(lo, lo + n) if self.apart else self.cache
            self.firsts.append(_prefill(self.model, part, pos, into, self.plans, self.scored_only))
            self.masks.append(part.attention_mask.bool())
            # The next position of each row: text counts real tokens; M-RoPE continues after the
            # maximum over its real tokens (a right-padded batch without images numbers pads on).
            real = part.attention_mask.bool()
            self.nexts.append(torch.stack([real.sum(-1), *[torch.where(real, pos[1:], 0).amax(dim=(0, 2)) + 1] * 3]))
            self.prefilled += n
        self.max_new += max_new

    @torch.inference_mode()
    def decode(self, stop_ids: set[int], pad_id: int, graphs: DecodeGraphs | None = None,
               pacer: LaunchPacer | None = None, lookback: int | None = None, planless: bool = False,
               stopped: Callable[[], Sequence[bool] | None] | None = None,
               rows: int | None = None) -> Callable[[], list[list[int]]]:
        """The first ``rows`` rows prefilled (all by default), decoded together (``greedy_start``'s
        second half, its arguments). Fewer rows: the room nobody took, or a joining batch whose
        own prefill or decode failed, left out."""
        rows = self.prefilled if rows is None else min(rows, self.prefilled)
        max_new, length = self.max_new[:rows], self.length
        steps = max(max_new, default=0)
        assert self.cache is not None, "a prefilled batch is decoded once"
        cache = self.cache if rows == self.reserved else self.cache.rows(0, rows)
        if self.apart:
            cache.filled(length)
        capacity = self.capacity
        dev = self.firsts[0].device
        nxt = torch.cat(self.firsts)[:rows].argmax(-1)
        tokens = torch.zeros((rows, steps), dtype=torch.long, device=dev)
        # Through page-locked memory, without waiting: a plain copy would wait for the prefill, and
        # the host's set-up and capture below could no longer overlap it.
        limit = to_device(torch.tensor(max_new, dtype=torch.long), dev)
        stop = to_device(torch.tensor(sorted(stop_ids), dtype=torch.long), dev)
        done = limit <= 0
        inputs = _StepInputs(
            ids=torch.empty((rows, 1), dtype=torch.long, device=dev),
            positions=torch.cat(self.nexts, dim=1)[:, :rows, None].clone(),
            slot=torch.full((1,), length, dtype=torch.long, device=dev),
            mask=torch.zeros((rows, 1, 1, capacity), dtype=torch.bool, device=dev),
        )
        inputs.mask[:, 0, 0, :length] = torch.cat(
            [torch.nn.functional.pad(m, (0, length - m.shape[1])) for m in self.masks])[:rows]
        replay = _replays(graphs, dev, steps)
        step = DecodeStep(self.model, cache, inputs, graphs if replay else None, pacer)
        if self.fixed:
            cache.start_decoding(inputs.slot)
        default = DEFAULTS.decode_lookback if dev.type == "cuda" else 0
        watch = FinishWatch(dev, default if lookback is None else lookback)
        ran = 0  # steps whose tokens are written
        # The check's eager fixed-shape steps run the kernels a captured step runs (op graph_fused).
        mimic = graphs is not None and graphs.fixed_steps and not replay
        with decode_kernels(planless), graph_kernels(self.model, mimic):
            for s in range(steps):
                tokens[:, s] = nxt
                ran = s + 1
                # Comparing with every stop id (not ``torch.isin``, which sorts, and reads the device,
                # for many ids).
                done = done | (nxt[:, None] == stop).any(-1) | (limit <= s + 1)
                if stopped is not None and (gone := stopped()) is not None:
                    done = done | torch.tensor(list(gone), dtype=torch.bool).to(dev, non_blocking=True)
                if s + 1 == steps or watch.finished(done):
                    break
                # Finished rows keep stepping with a pad token; their output is already final.
                inputs.ids.copy_(torch.where(done, pad_id, nxt)[:, None])
                inputs.mask[:, 0, 0, length + s] = True
                nxt = step().argmax(-1)
                inputs.positions.add_(1)
                inputs.slot.add_(1)
        self.cache, self.firsts, self.masks, self.nexts = None, [], [], []
        # Copied back without waiting, and read when asked: the read waits for this batch's last step
        # alone, not for whatever the stream runs after it. Slots past the last step were never
        # written (a batch ended early: every row stopped).
        tokens = tokens[:, :ran]
        cuda = dev.type == "cuda"
        host = pinned_empty(tuple(tokens.shape), tokens.dtype, dev)
        host.copy_(tokens, non_blocking=cuda)
        ready = torch.cuda.current_stream().record_event() if cuda else None

        def read() -> list[list[int]]:
            if ready is not None:
                ready.synchronize()
            return _cut(host.tolist(), max_new, stop_ids)

        if not watch.waited:
            # The loop ended without ever waiting for the device (one or two steps): the prefill may
            # still be queued, and a caller timing the batch at the return would time its launch.
            got = read()
            return lambda: got
        return read


def _cut(tokens: list[list[int]], max_new: list[int], stop_ids: set[int]) -> list[list[int]]:
    """Each row's tokens up to its first stop token (excluded) and at most its ``max_new``."""
    out = []
    for row, n in zip(tokens, max_new, strict=True):
        row = row[: max(0, n)]
        end = next((i for i, t in enumerate(row) if t in stop_ids), len(row))
        out.append(row[:end])
    return out
