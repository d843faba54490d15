"""The scoring forwards of the ``hf`` engine: one padded batch, or families packed with their shared prefix
(greedy generation is ``forward.generate``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from benchcheck.engines.hf.forward.batch import Batch, last_real, position_ids
from benchcheck.engines.hf.forward.packed import PackedBatch, packed_logprobs
from benchcheck.engines.hf.model.scored import Scored, installed
from benchcheck.engines.hf.runtime.transfer import to_device


@dataclass(slots=True)
class PendingTop:
    """Top-k of a forward on its way to the host; ``wait`` before reading."""

    values: torch.Tensor  # (B, k) float32, host
    indices: torch.Tensor  # (B, k) int64, host
    done: torch.cuda.Event | None
    gathered: torch.Tensor | None = None  # (B, n) float32, host: the log-probs of ``gather_ids``

    def wait(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.done is not None:
            self.done.synchronize()
        return self.values, self.indices


def _to_host(t: torch.Tensor) -> torch.Tensor:
    if t.device.type != "cuda":
        return t
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    return host.copy_(t, non_blocking=True)


@torch.inference_mode()
def score_batch(model: Any, batch: Batch, k: int, gather_ids: torch.Tensor | None = None,
                scored_only: bool = False) -> PendingTop:
    """One prefill forward: log-softmax at each row's last position and its top ``k``
    (logprobs, token ids), each (B, k), and the exact log-probs of ``gather_ids`` (letter
    variants) from the same row. With ``scored_only`` (right padding) the last decoder layer runs
    at the scored positions only (``model.scored``, where installed).
    Returns as soon as the work is queued on the device, so the caller can queue the next batch
    before reading this one."""
    pos = position_ids(batch)
    if not batch.right:
        out = model(**batch.model_kwargs(model), position_ids=pos, logits_to_keep=1, use_cache=False)
        return _pending_top(torch.log_softmax(out.logits[:, -1, :].float(), dim=-1), k, gather_ids)
    # Right padding: each row's scored position is its own last real token; only those rows of
    # hidden states go through the LM head.
    if scored_only and installed(model):
        scored = Scored.right_padded(batch.lengths, batch.input_ids.shape[1], pos.device)
        hidden = model.model(**batch.model_kwargs(model), position_ids=pos, use_cache=False,
                             scored=scored).last_hidden_state[0]
        return _pending_top(torch.log_softmax(model.lm_head(hidden).float(), dim=-1), k, gather_ids)
    states = model.model(**batch.model_kwargs(model), position_ids=pos, use_cache=False).last_hidden_state
    hidden = last_real(batch, states)
    return _pending_top(torch.log_softmax(model.lm_head(hidden).float(), dim=-1), k, gather_ids)


@torch.inference_mode()
def score_packed(model: Any, batch: PackedBatch, k: int, gather_ids: torch.Tensor | None = None,
                 scored_only: bool = False) -> PendingTop:
    """``score_batch`` for families packed with their shared prefix once (``schedule.families``)."""
    return _pending_top(packed_logprobs(model, batch, scored_only), k, gather_ids)


def _pending_top(logprobs: torch.Tensor, k: int, gather_ids: torch.Tensor | None = None) -> PendingTop:
    """Top ``k`` of each row, copied to the host without waiting."""
    top = torch.topk(logprobs, k, dim=-1)
    values, indices = _to_host(top.values), _to_host(top.indices)
    gathered = None if gather_ids is None else _to_host(logprobs[:, to_device(gather_ids, logprobs.device)])
    done = None
    if top.values.device.type == "cuda":
        done = torch.cuda.current_stream().record_event()
    return PendingTop(values, indices, done, gathered)
