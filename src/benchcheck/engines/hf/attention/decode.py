"""Attention of one new token per row over a reserved KV cache (generation's decode steps)."""

from __future__ import annotations

import torch

from benchcheck.engines.hf.attention.cache import KEY_BLOCK
from benchcheck.engines.hf.kernels import decode_split, refuse, refused, triton_available


def decode_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                     scaling: float, split: bool = False) -> torch.Tensor:
    """Attention of one new token per row over a reserved cache: (B, H, 1, D) queries, (B, Hkv,
    S, D) keys and values, ``mask`` (B, 1, 1, S) bool; returns (B, 1, H, D) as transformers'
    attention functions do.

    Written as matrix products, not one attention kernel: a masked one-token query gets one
    thread block per K/V head on SDPA's masked kernels, so at the sweep's 54,000 keys eight
    blocks read 8 GB a step (H200: ~84 ms a step, the device otherwise idle). Here the H / Hkv
    query heads of a key head are the rows of one product with that head's keys (no key is
    repeated per query head), the scores stay in float32 as in flash attention, and the
    probabilities (rounded to the cache's dtype, as flash attention rounds them) meet the values
    in blocks of ``KEY_BLOCK`` keys whose float32 partial sums are added: every product is
    spread over the whole device, the cache read once.

    ``split`` (op ``decode_split``): on CUDA with Triton, one kernel over spans of the keys instead
    (``kernels.decode_split``), where it takes the inputs and the device runs it (inside the
    replayed steps faster at every row count, decision 119); these products elsewhere."""
    if (split and query.is_cuda
            and not refused("decode_split", query.device) and triton_available()
            and decode_split.supported(query, key, value, mask)):
        from triton.runtime.errors import OutOfResources

        from benchcheck.engines.hf.kernels.decode_split_triton import split_decode_attention

        try:
            return split_decode_attention(query, key, value, mask, scaling)
        except OutOfResources as err:  # less shared memory than the kernel's stages need
            refuse("decode_split", query.device, err, "batched matrix products for the decode attention")
    b, h, _, d = query.shape
    hk, s = key.shape[1], key.shape[2]
    g = h // hk
    q = query.reshape(b * hk, g, d)
    scores = _product_f32(q, key.reshape(b * hk, s, d).transpose(1, 2)).view(b, hk, g, s)
    scores = torch.where(mask, scores * scaling, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    block = KEY_BLOCK if s % KEY_BLOCK == 0 else s
    n = s // block
    parts = _product_f32(probs.view(b * hk, g, n, block).transpose(1, 2).reshape(b * hk * n, g, block),
                         value.reshape(b * hk * n, block, value.shape[-1]))
    out = parts.view(b * hk, n, g, -1).sum(1).to(value.dtype)
    return out.reshape(b, h, 1, -1).transpose(1, 2)


def _product_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (batched) with a float32 result: on CUDA from 16-bit inputs directly (cuBLAS
    accumulates in float32 anyway), elsewhere or without that operator by computing in float32."""
    if a.dtype != torch.float32 and a.is_cuda and _MM_OUT_DTYPE:
        return torch.bmm(a, b, out_dtype=torch.float32)
    return torch.bmm(a.float(), b.float())


_MM_OUT_DTYPE = hasattr(torch.ops.aten.bmm, "dtype")  # torch >= 2.8
