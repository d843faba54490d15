"""Tree attention of prefix-shared families as variable-length attention over one packed row.

``schedule.families`` packs families of requests (a shared prefix, then each member's suffix). With a
dense tree-shaped mask over left-padded rows, SDPA has to run its masked kernel over the whole
(width x width) square, and transformers then expands K/V from the model's 8 heads to 32 by
copying (SDPA's grouped-query support is used only without a mask): on the H200, 10 % + ~4 % of
the 8B blind step's device time. Here the batch is instead ONE row of every family's tokens, no
padding, cut into query sequences: each sharing family's prefix (keys: the prefix, causal), then
one sequence per member suffix (keys: the prefix and that suffix, causal aligned at the bottom
right: suffix token i sees the whole prefix and suffix tokens <= i); a request alone is one causal
sequence of its own tokens. Queries already lie contiguous per sequence in the row; when some
family shares, keys and values are gathered per layer by one index built on the host once per
forward (only 8 heads x 128 wide: cheap next to the matmuls), and a row where nothing is shared
reads them in place (one-frame requests scored unpadded). On CUDA in bf16/fp16 the
attention is ``kernels.varlen_triton``'s kernel where every key sequence is short, else
FlashAttention-2's variable-length kernel (both: no mask, grouped K/V heads natively);
elsewhere a per-sequence SDPA reference of the same semantics (the CPU tests check the plumbing
with it in float32).

The language model reaches this through a registered transformers attention implementation
(``NAME``) that delegates to SDPA unless the forward carries a ``varlen_plan`` keyword argument
(transformers hands a forward's extra keyword arguments to every attention call). The packed
forward passes no mask and only the three M-RoPE position rows, so transformers builds no mask
for the row (no packed-sequence probe either).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchcheck.engines.hf.attention.sdpa import PLANS_KWARG, PlanMemo
from benchcheck.engines.hf.config import DEFAULTS
from benchcheck.engines.hf.kernels import triton_available
from benchcheck.engines.hf.kernels.varlen import reference_varlen, supported
from benchcheck.engines.hf.runtime.transfer import to_device

NAME = "benchcheck_tree_sdpa"  # the text attention implementation of an engine's model
BASE = "sdpa"  # what it runs for every forward without a plan


@dataclass(frozen=True, slots=True)
class VarlenPlan:
    """Query/key sequences of one packed row (``cu_*``: cumulative lengths, on the device)."""

    cu_q: torch.Tensor  # (S+1,) int32
    cu_k: torch.Tensor  # (S+1,) int32
    # (total keys,) int64: the row position of each gathered key; None when every sequence's keys
    # are its own queries (no family shares a prefix), so that attention reads K/V in place.
    kv_index: torch.Tensor | None
    max_q: int
    max_k: int
    host_cu_q: np.ndarray  # the same on the host: the reference kernel loops without device reads
    host_cu_k: np.ndarray
    # Rows whose key sequences are all at most this long take the Triton kernel, the others
    # FlashAttention-2's (where both run: CUDA, 16-bit floats); 0: FlashAttention-2 always
    # (``HFConfig``: op ``varlen_triton``, ``varlen_triton_max_keys``; decision 025).
    triton_max_keys: int = DEFAULTS.varlen_triton_max_keys


def build_plan(families: Sequence[tuple[int, int, Sequence[int]]], device: torch.device,
               triton_max_keys: int = DEFAULTS.varlen_triton_max_keys) -> VarlenPlan:
    """The plan of a row holding, for each ``(start, prefix, suffixes)``, a family's prefix of
    ``prefix`` tokens at ``start`` followed by its suffixes of the given lengths. A family of one
    member (one suffix) is one causal sequence of its own tokens: a request that shares nothing
    (a one-frame item) then costs the kernel no second sequence and no gathered keys."""
    q_lens: list[int] = []
    k_lens: list[int] = []
    parts: list[np.ndarray] = []
    shared = False
    for start, prefix, suffixes in families:
        if len(suffixes) == 1:
            n = prefix + suffixes[0]
            q_lens.append(n)
            k_lens.append(n)
            parts.append(np.arange(start, start + n, dtype=np.int64))
            continue
        shared = True
        pre = np.arange(start, start + prefix, dtype=np.int64)
        q_lens.append(prefix)
        k_lens.append(prefix)
        parts.append(pre)
        at = start + prefix
        for s in suffixes:
            q_lens.append(s)
            k_lens.append(prefix + s)
            parts += [pre, np.arange(at, at + s, dtype=np.int64)]
            at += s
    # Safeguard: a sequence with no queries (an empty prefix) is dropped; every member's suffix
    # and every lone prompt have at least one token.
    keep = [i for i, n in enumerate(q_lens) if n > 0]
    ql, kl = np.asarray(q_lens, np.int64)[keep], np.asarray(k_lens, np.int64)[keep]
    cu_q = np.concatenate([[0], np.cumsum(ql)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(kl)]).astype(np.int32)
    index = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    # Lone families laid out back to back from 0 read their keys where they are.
    in_place = not shared and np.array_equal(index, np.arange(len(index)))
    return VarlenPlan(to_device(cu_q, device), to_device(cu_k, device),
                      None if in_place else to_device(index, device),
                      int(ql.max(initial=0)), int(kl.max(initial=0)), cu_q, cu_k, triton_max_keys)


@functools.cache
def flash_available(device: torch.device, dtype: torch.dtype) -> bool:
    """FlashAttention's variable-length kernel can run here: CUDA (compute capability 8.0 or
    later, torch built with it) and a 16-bit float dtype. (Cached: asked in every layer.)"""
    if device.type != "cuda" or dtype not in (torch.bfloat16, torch.float16):
        return False
    if not torch.backends.cuda.is_flash_attention_available():
        return False
    return torch.cuda.get_device_capability(device)[0] >= 8



def flash_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: VarlenPlan, scale: float) -> torch.Tensor:
    """FlashAttention-2, variable length, causal (bottom-right aligned where a sequence has more
    keys than queries), K/V heads shared by groups of query heads. q (T, H, D), k/v (K, Hk, D)."""
    out = torch.ops.aten._flash_attention_forward(q, k, v, plan.cu_q, plan.cu_k, plan.max_q, plan.max_k, 0.0,
                                                  True, False, scale=scale)
    return out[0]  # type: ignore[no-any-return]


def tree_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, *, varlen_plan: VarlenPlan | None = None,
                   **kwargs: Any) -> tuple[torch.Tensor, None]:
    """A transformers attention function: SDPA's, or with ``varlen_plan`` the packed row's tree
    attention. query (1, H, T, D), key/value (1, Hk, T, D); returns (1, T, H, D) like SDPA's."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    plans: PlanMemo | None = kwargs.pop(PLANS_KWARG, None)
    if varlen_plan is None:
        if plans is None:
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
        # transformers' own rule for a causal SDPA call: no mask, more than one query, and the
        # call's ``is_causal`` (else the module's) true.
        wanted = kwargs.get("is_causal")
        causal = (attention_mask is None and query.shape[2] > 1
                  and bool(wanted if wanted is not None else getattr(module, "is_causal", True)))
        with plans.kernels(query, key, value, causal):
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if query.shape[0] != 1 or attention_mask is not None:
        raise ValueError("variable-length tree attention takes one packed row and no mask")
    scale = kwargs.get("scaling")
    scale = float(scale) if scale is not None else query.shape[-1] ** -0.5
    q = query[0].transpose(0, 1)  # (T, H, D): a view of the projection's (1, T, H, D) layout
    k, v = key[0].transpose(0, 1), value[0].transpose(0, 1)
    if varlen_plan.kv_index is not None:  # shared prefixes: each suffix's keys gathered after its prefix's
        k, v = k.index_select(0, varlen_plan.kv_index), v.index_select(0, varlen_plan.kv_index)
    if not flash_available(q.device, q.dtype):
        return reference_varlen(q, k, v, varlen_plan, scale)[None], None
    if varlen_plan.max_k <= varlen_plan.triton_max_keys and triton_available() and supported(q, k):
        from benchcheck.engines.hf.kernels.varlen_triton import varlen_attention

        return varlen_attention(q, k, v, varlen_plan, scale)[None], None
    return flash_varlen(q, k, v, varlen_plan, scale)[None], None


def use_tree_attention(model: Any) -> bool:
    """Let ``model``'s language model (under SDPA) take ``varlen_plan``; True when it can. Every
    forward without a plan runs exactly as under SDPA (same attention and mask functions)."""
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    lm = model.model.language_model
    configs = {id(c): c for c in (lm.config, *(m.config for m in lm.modules() if hasattr(m, "config")))}
    if any(c._attn_implementation not in (BASE, NAME) for c in configs.values()):
        return False
    AttentionInterface.register(NAME, tree_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    for c in configs.values():
        c._attn_implementation = NAME
    return True
