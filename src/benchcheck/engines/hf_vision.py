"""Grouped attention for the Qwen3-VL vision tower under SDPA.

Without flash-attention, transformers runs the vision tower's attention one image at a time: a
Python loop of ``scaled_dot_product_attention`` calls per layer (32 frames x 24 layers = 768 calls
per request). Every frame of a request usually has the same size, so runs of equal-length images
can go through one batched call instead: the same attention per image (images never attend to
each other), a fraction of the launches. This replaces the ``forward`` of the attention modules
of one model instance only; nothing global changes.
"""

from __future__ import annotations

import itertools
import types
from typing import Any

import torch
import torch.nn.functional as F


def _grouped_forward(
    self: Any,
    hidden_states: torch.Tensor,
    cu_seqlens: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    max_seqlen: int | None = None,
    **kwargs: Any,
) -> torch.Tensor:
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

    seq = hidden_states.shape[0]
    heads = self.num_heads
    q, k, v = self.qkv(hidden_states).reshape(seq, 3, heads, -1).permute(1, 0, 2, 3).unbind(0)
    cos, sin = position_embeddings
    q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    out = []
    start = 0
    for n, run in itertools.groupby(lengths):
        count = len(list(run))
        end = start + n * count

        def split(x: torch.Tensor, lo: int = start, hi: int = end, n: int = n, c: int = count) -> torch.Tensor:
            return x[lo:hi].reshape(c, n, heads, -1).transpose(1, 2)  # (images, heads, n, head_dim)

        o = F.scaled_dot_product_attention(split(q), split(k), split(v), scale=self.scaling)
        out.append(o.transpose(1, 2).reshape(n * count, -1))
        start = end
    return self.proj(torch.cat(out).contiguous())  # type: ignore[no-any-return]


def use_grouped_vision_attention(model: Any, enabled: bool = True) -> int:
    """Switch the vision attention of ``model`` (a Qwen3-VL model under SDPA) to grouped calls,
    or back to transformers' own (``enabled=False``); return how many modules changed (0 when
    the model runs another attention kernel)."""
    visual = model.model.visual
    if getattr(visual.config, "_attn_implementation", None) != "sdpa":
        return 0
    changed = 0
    for block in visual.blocks:
        attn = block.attn
        if type(attn).__name__ != "Qwen3VLVisionAttention":
            continue
        if enabled:
            attn.forward = types.MethodType(_grouped_forward, attn)
        elif "forward" in vars(attn):
            del attn.forward  # the class's own forward again
        changed += 1
    return changed
