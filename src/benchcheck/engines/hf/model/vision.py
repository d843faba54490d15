"""Grouped attention for the Qwen3-VL vision tower under SDPA.

Without flash-attention, transformers runs the vision tower's attention one image at a time: a
Python loop of ``scaled_dot_product_attention`` calls per layer (32 frames x 24 layers = 768 calls
per request). Every frame of a request usually has the same size, so runs of equal-length images
can go through one batched call instead: the same attention per image (images never attend to
each other), a fraction of the launches. This replaces the ``forward`` of the attention modules
of one model instance only; nothing global changes.

Two more changes of the same kind: the image lengths are read off the device once per forward,
not once per layer (each read waits for the device to drain its queue), and the rotary
embedding runs on CUDA as one Triton kernel from the qkv projection's output to contiguous q and
k (``qkv_rotary=``, ``kernels.vision_rotary``; ``rotary=`` takes a replacement of transformers'
``apply_rotary_pos_emb_vision`` on its strided views instead). ``use_linear_patch_embed``
computes the patch embedding, a 3-D convolution whose stride equals its kernel, as the matrix
product it is (the convolution ran as a slow implicit-GEMM kernel on the H200).

With op ``vision_pow2`` (off by default: not shown to pay, decision 108), each run's images go
through one call per power of two of its count, largest first (``pow2_chunks``), on views of the
same q, k and v: SDPA's cuDNN kernel builds a plan on the host, the device idle, for every new
shape, and the number of frames in a batch is new at almost every call, while a few power-of-two
batch sizes recur and their plans are reused.
"""

from __future__ import annotations

import contextlib
import itertools
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from benchcheck.engines.hf.attention.sdpa import PLANS_KWARG, PlanMemo
from benchcheck.engines.hf.model.state import ModelState, state_of


def _grouped_forward(state: ModelState) -> Callable[..., torch.Tensor]:
    """The grouped vision attention forward over ``state`` (its rotary functions and the
    per-forward image lengths, shared by the blocks of one tower)."""

    def forward(self: Any, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor,
                position_embeddings: tuple[torch.Tensor, torch.Tensor], max_seqlen: int | None = None,
                **kwargs: Any) -> torch.Tensor:
        return _grouped(self, state, hidden_states, cu_seqlens, position_embeddings, kwargs.get(PLANS_KWARG))

    return forward


def pow2_chunks(count: int) -> list[int]:
    """``count`` as a sum of distinct powers of two, largest first: the batch sizes of a run's
    attention calls under op ``vision_pow2``.

    >>> pow2_chunks(582)
    [512, 64, 4, 2]
    >>> pow2_chunks(1)
    [1]
    """
    return [1 << bit for bit in range(count.bit_length() - 1, -1, -1) if count >> bit & 1]


def _grouped(self: Any, state: ModelState, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor,
             position_embeddings: tuple[torch.Tensor, torch.Tensor], plans: PlanMemo | None = None) -> torch.Tensor:
    seq = hidden_states.shape[0]
    heads = self.num_heads
    qkv = self.qkv(hidden_states)
    cos, sin = position_embeddings
    if state.vision_qkv_rotary is not None:  # one pass from the projection to contiguous q and k
        q, k = state.vision_qkv_rotary(qkv, cos, sin, heads)
        v = qkv.view(seq, 3, heads, -1)[:, 2]  # SDPA reads v in place
    else:
        q, k, v = qkv.reshape(seq, 3, heads, -1).permute(1, 0, 2, 3).unbind(0)
        assert state.vision_rotary is not None
        q, k = state.vision_rotary(q, k, cos, sin)
    memo = state.vision_lengths  # shared by the blocks of one tower: one device read per forward
    if memo[0] is not cu_seqlens:
        memo[:] = [cu_seqlens, (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()]
    lengths = memo[1]
    # Power-of-two batches: shapes that recur from call to call, so cuDNN reuses its plans.
    pow2 = state.config.op("vision_pow2", hidden_states.is_cuda)
    out = []
    start = 0
    for n, run in itertools.groupby(lengths):
        count = len(list(run))
        end = start + n * count

        def split(x: torch.Tensor, lo: int = start, hi: int = end, n: int = n, c: int = count) -> torch.Tensor:
            return x[lo:hi].reshape(c, n, heads, -1).transpose(1, 2)  # (images, heads, n, head_dim)

        qs, ks, vs = split(q), split(k), split(v)
        first = 0
        for c in pow2_chunks(count) if pow2 else [count]:  # views of the run's images: no copies
            last = first + c
            qc, kc, vc = qs[first:last], ks[first:last], vs[first:last]
            with plans.kernels(qc, kc, vc, causal=False) if plans is not None else contextlib.nullcontext():
                o = F.scaled_dot_product_attention(qc, kc, vc, scale=self.scaling)
            out.append(o.transpose(1, 2).reshape(n * c, -1))
            first = last
        start = end
    # One call in all (every image of the forward the same size, with the op off or a count that
    # is a power of two): no concatenation, which would copy the whole output once more.
    merged = out[0] if len(out) == 1 else torch.cat(out)
    return self.proj(merged.contiguous())  # type: ignore[no-any-return]


def use_grouped_vision_attention(
    model: Any, enabled: bool = True, rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
    qkv_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> int:
    """Switch the vision attention of ``model`` (a Qwen3-VL model under SDPA) to grouped calls,
    or back to transformers' own (``enabled=False``); return how many modules changed (0 when
    the model runs another attention kernel). ``rotary`` replaces transformers'
    ``apply_rotary_pos_emb_vision`` (same arguments and result); ``qkv_rotary`` (as
    ``kernels.vision_rotary_triton.qkv_rotary``: the qkv projection's output, cos, sin and the head count in,
    rotated q and k out) replaces the split of the projection and the rotary embedding together,
    and takes precedence over ``rotary``."""
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

    visual = model.model.visual
    if getattr(visual.config, "_attn_implementation", None) != "sdpa":
        return 0
    changed = 0
    state = state_of(model)
    if enabled:
        state.vision_rotary = rotary or apply_rotary_pos_emb_vision
        state.vision_qkv_rotary = qkv_rotary
    for block in visual.blocks:
        attn = block.attn
        if type(attn).__name__ != "Qwen3VLVisionAttention":
            continue
        if enabled:
            attn.forward = types.MethodType(_grouped_forward(state), attn)
        elif "forward" in vars(attn):
            del attn.forward  # the class's own forward again
        changed += 1
    return changed


def _linear_patch_embed(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    w = self.proj.weight  # (hidden, C, T, P, P): the kernel covers the whole patch
    x = hidden_states.reshape(-1, w[0].numel()).to(w.dtype)
    return F.linear(x, w.reshape(w.shape[0], -1), self.proj.bias)


def use_linear_patch_embed(model: Any) -> bool:
    """Run the patch embedding of ``model``'s vision tower as one matrix product (same sums)."""
    embed = model.model.visual.patch_embed
    conv = getattr(embed, "proj", None)
    if not isinstance(conv, torch.nn.Conv3d) or tuple(conv.stride) != tuple(conv.kernel_size):
        return False
    if any(conv.padding) or any(d != 1 for d in conv.dilation):
        return False
    embed.forward = types.MethodType(_linear_patch_embed, embed)
    return True


