"""Attention of one new token per row over a reserved K/V cache, split over the keys: what the
Triton kernel (``decode_split_triton``) computes, the inputs it takes, and how it splits the keys
(no Triton needed).

A decode step's attention reads every row's whole reservation of keys and values (at the sweep's
54,000 tokens, 8 GB a row for the 8B). ``attention.decode.decode_attention`` runs it as batched
matrix products: one new token's scores, a float32 softmax, then the values in blocks of 128 keys
whose float32 partial sums are added. The kernel reads the keys and values once, in the splits a
grid of programs covers (flash decoding): each program takes one row's K/V head and one span of
keys, keeps a running maximum and sum of its scores in float32 (the query heads of that K/V head
are the rows of its products, no key repeated per query head), and writes its partial output;
``combine`` weighs the spans' partial outputs by their maxima and sums. The reference is
``decode_attention``: the kernel's output agrees with it within rounding (tested).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
HEAD_DIMS = (16, 32, 64, 128, 256)  # the kernel's arange needs a power of two (Qwen3-VL: 128)
BLOCK_N = 64  # keys an inner step; a reservation for fixed-shape steps is a multiple of it
GROUP_ROWS = 16  # the query heads of a K/V head padded to a matrix product's smallest row count
PROGRAMS = 1024  # programs a step aims at: a few per multiprocessor on any current GPU


@dataclass(frozen=True)
class Tuning:
    """How the kernel is launched: about ``programs`` programs a step, ``block_n`` keys an inner
    step (a power of two from ``BLOCK_N``; a reservation that is not a multiple of it runs at
    ``BLOCK_N``), ``warps`` and pipeline ``stages`` a program, and whether the spans are combined
    by one kernel (``fused_combine``) or by torch's operations (``combine``), which in a replayed
    step are about ten small kernels a layer. ``benchmarks/decode_attention.py --tunings`` times
    others."""

    programs: int = PROGRAMS
    block_n: int = BLOCK_N
    warps: int = 4
    stages: int = 3
    fused_combine: bool = True

    def label(self) -> str:
        """``block_n/warps/stages`` with ``@programs`` and ``+torch`` where those differ from the default."""
        text = f"{self.block_n}/{self.warps}/{self.stages}"
        text += f"@{self.programs}" if self.programs != PROGRAMS else ""
        return text + ("" if self.fused_combine else "+torch")

    @classmethod
    def parse(cls, text: str) -> Tuning:
        """The inverse of ``label``: ``"128/8/2@2048+torch"``."""
        form = re.fullmatch(r"(\d+)/(\d+)/(\d+)(?:@(\d+))?(\+torch)?", text)
        if form is None:
            raise ValueError(f"kernel tuning {text!r}: want BLOCK_N/WARPS/STAGES[@PROGRAMS][+torch]")
        block_n, warps, stages = (int(x) for x in form.group(1, 2, 3))
        programs = form.group(4)
        tuning = cls(int(programs) if programs else PROGRAMS, block_n, warps, stages, form.group(5) is None)
        # Triton's ranges and warp counts are powers of two.
        if (block_n < BLOCK_N or block_n & (block_n - 1) or warps <= 0 or warps & (warps - 1) or stages <= 0
                or tuning.programs <= 0):
            raise ValueError(f"kernel tuning {text!r}: keys a step and warps powers of two (keys {BLOCK_N} or more), "
                             "stages and programs positive")
        return tuning


TUNING = Tuning()  # the engine's launch: decision 119's, its spans combined by one kernel (decision 130)


def supported(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor) -> bool:
    """(B, H, 1, D) queries over (B, Hk, S, D) keys and values and a (B, 1, 1, S) bool mask: H a
    multiple of Hk and at most ``GROUP_ROWS`` times it, D a power of two from 16 to 256, S a
    multiple of ``BLOCK_N``, one float dtype, the head dimension contiguous."""
    if query.dim() != 4 or key.dim() != 4 or value.shape != key.shape or mask.dim() != 4:
        return False
    b, h, one, d = query.shape
    hk, s = key.shape[1], key.shape[2]
    return (one == 1 and key.shape[0] == b and key.shape[3] == d and d in HEAD_DIMS and h % hk == 0
            and h // hk <= GROUP_ROWS and s % BLOCK_N == 0 and s > 0 and tuple(mask.shape) == (b, 1, 1, s)
            and mask.dtype == torch.bool and query.dtype == key.dtype == value.dtype and query.dtype in DTYPES
            and query.stride(3) == 1 and key.stride(3) == 1 and value.stride(3) == 1 and key.stride(2) == d
            and value.stride(2) == d and mask.stride(3) == 1)


def split_keys(rows: int, kv_heads: int, keys: int, programs: int = PROGRAMS,
               block_n: int = BLOCK_N) -> tuple[int, int]:
    """(splits, keys a split): about ``programs`` programs over rows x K/V heads x splits, each
    split a whole number of ``block_n`` key blocks (``keys`` a multiple of it).

    >>> split_keys(1, 8, 54_400)
    (122, 448)
    >>> split_keys(5, 8, 54_400)
    (26, 2112)
    >>> split_keys(1, 2, 64)
    (1, 64)
    """
    blocks = keys // block_n
    want = max(1, min(blocks, -(-programs // max(1, rows * kv_heads))))
    per = -(-blocks // want)
    return -(-blocks // per), per * block_n


def combine(acc: torch.Tensor, top: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """The attention output from the splits' partial outputs: ``acc`` (B, H, n, D) float32 sums of
    exp(score - top) times the values, ``top`` (B, H, n) each split's running maximum, ``total``
    (B, H, n) its sum of exp(score - top). Returns (B, H, D) float32."""
    weight = torch.exp(top - top.amax(-1, keepdim=True))
    return (acc * weight[..., None]).sum(2) / (total * weight).sum(-1)[..., None]
