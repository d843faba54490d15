"""Families of requests packed with their shared prefix once, and their scoring forward.

``schedule.families`` decides which requests form a family; here a family becomes model inputs:
one left-padded row per family with a dense tree mask, or every family in ONE unpadded row whose
attention ``attention.varlen`` cuts into sequences. Every member's last position sees exactly the
keys, values and positions of its unshared forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchcheck.engines.hf.attention.sdpa import masked_attention_kernels
from benchcheck.engines.hf.attention.varlen import VarlenPlan, build_plan
from benchcheck.engines.hf.forward.pixels import PixelSpec, patchify
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.model.scored import Scored, installed
from benchcheck.engines.hf.model.vision_inputs import vision_inputs
from benchcheck.engines.hf.runtime.transfer import to_device


@dataclass(frozen=True, slots=True)
class Family:
    """Requests (indices into the batch) that share their first ``prefix`` tokens."""

    members: tuple[int, ...]
    prefix: int


@dataclass(slots=True)
class PackedBatch:
    """Model inputs of packed families, and where each request is scored. Two layouts: one
    left-padded row per family with a dense tree mask, or (``varlen``) every family in ONE row,
    no padding, no mask, attention cut into sequences by ``attention.varlen``."""

    input_ids: torch.Tensor  # (B, W); (1, T) in one row
    mm_token_type_ids: torch.Tensor  # (B, W)
    attention_mask: torch.Tensor | None  # (B, 1, W, W) additive, model dtype (0 may attend, -inf not); None in one row
    position_ids: torch.Tensor  # (4, B, W): text positions, then M-RoPE (t, h, w); one row: (3, 1, T), M-RoPE only
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    rows: torch.Tensor  # (N,) packed row of request n (batch order)
    cols: torch.Tensor  # (N,) its last position in that row
    host_grid: torch.Tensor | None = None  # image_grid_thw on the CPU
    varlen: VarlenPlan | None = None  # the one row's attention sequences
    scored: Scored | None = None  # each request's scored token and its keys (model.scored), request order


@dataclass(frozen=True, slots=True)
class _FamilyTokens:
    """One family's packed tokens: the prefix once, then each member's suffix."""

    ids: np.ndarray  # (L,)
    types: np.ndarray  # (L,)
    pos: np.ndarray  # (4, L): text position, then M-RoPE (t, h, w), each as in the member's own prompt
    suffixes: tuple[int, ...]  # suffix lengths, in member order


def _family_tokens(prompts: Sequence[EncodedPrompt], fam: Family) -> _FamilyTokens:
    first = prompts[fam.members[0]]
    n = fam.prefix
    suffixes = [prompts[m].input_ids[n:] for m in fam.members]
    length = n + sum(len(s) for s in suffixes)
    ids = np.concatenate([first.input_ids[:n], *suffixes])
    types = np.zeros(length, np.int64)
    types[:n] = first.mm_token_type_ids[:n]
    pos = np.zeros((4, length), np.int64)
    pos[0, :n] = np.arange(n)
    # The prefix's M-RoPE positions are the prompt's own (they depend on the tokens before them only).
    mrope = first.mrope[:, :n] if first.mrope is not None else np.broadcast_to(np.arange(n), (3, n))
    pos[1:, :n] = mrope
    # Every suffix token is text after the last image: its M-RoPE position continues one past the
    # largest of the prefix (as get_rope_index numbers text after images).
    nxt = int(mrope.max()) + 1 if n else 0
    at = n
    for s in suffixes:
        pos[0, at : at + len(s)] = n + np.arange(len(s))
        pos[1:, at : at + len(s)] = nxt + np.arange(len(s))
        at += len(s)
    return _FamilyTokens(ids, types, pos, tuple(len(s) for s in suffixes))


def pack(prompts: Sequence[EncodedPrompt], families: Sequence[Family], pad_id: int,
         pixels: PixelSpec, dtype: torch.dtype, one_row: bool = False) -> PackedBatch:
    """The families packed on the device of ``pixels``: one left-padded row each with the tree
    mask, or with ``one_row`` all in one row for ``attention.varlen``'s tree attention."""
    device = pixels.table.device
    toks = [_family_tokens(prompts, f) for f in families]
    frames: list[np.ndarray] = []
    grids: list[np.ndarray] = []
    for fam in families:  # a family's images lie inside its prefix: its first member's
        first = prompts[fam.members[0]]
        if first.frames:
            assert first.image_grid_thw is not None
            frames.extend(first.frames)
            grids.append(first.image_grid_thw)
    pixel_values = patchify(frames, pixels).to(dtype) if frames else None
    host_grid = torch.from_numpy(np.concatenate(grids)) if grids else None
    grid = to_device(host_grid, device) if host_grid is not None else None
    rows = np.zeros(len(prompts), np.int64)
    cols = np.zeros(len(prompts), np.int64)
    # Each request's keys: its family's prefix and its own suffix, as flat spans of the batch.
    keys: list[list[tuple[int, int]]] = [[] for _ in prompts]
    if one_row:
        starts = np.concatenate([[0], np.cumsum([len(t.ids) for t in toks])])
        for r, (fam, t) in enumerate(zip(families, toks, strict=True)):
            ends = starts[r] + fam.prefix + np.cumsum(t.suffixes)
            cols[list(fam.members)] = ends - 1
            for m, end, s in zip(fam.members, ends.tolist(), t.suffixes, strict=True):
                keys[m] = [(int(starts[r]), int(starts[r]) + fam.prefix), (end - s, end)]
        spans = [(int(starts[r]), f.prefix, t.suffixes) for r, (f, t) in enumerate(zip(families, toks, strict=True))]
        plan = build_plan(spans, device)
        return PackedBatch(
            to_device(np.concatenate([t.ids for t in toks])[None], device),
            to_device(np.concatenate([t.types for t in toks])[None], device),
            None,
            to_device(np.concatenate([t.pos[1:] for t in toks], axis=1)[:, None], device),
            pixel_values, grid, to_device(rows, device), to_device(cols, device), host_grid, plan,
            Scored.from_spans(cols.tolist(), keys, device),
        )
    width = max(len(t.ids) for t in toks)
    b = len(families)
    ids = np.full((b, width), pad_id, np.int64)
    types = np.zeros((b, width), np.int64)
    seg = np.full((b, width), -1, np.int64)  # -1 padding, 0 the prefix, j > 0 the j-th suffix
    pos = np.zeros((4, b, width), np.int64)
    for r, (fam, t) in enumerate(zip(families, toks, strict=True)):
        at = width - len(t.ids)
        ids[r, at:], types[r, at:], pos[:, r, at:] = t.ids, t.types, t.pos
        seg[r, at : at + fam.prefix] = 0
        prefix = (r * width + at, r * width + at + fam.prefix)
        at += fam.prefix
        for j, (m, s) in enumerate(zip(fam.members, t.suffixes, strict=True), start=1):
            seg[r, at : at + s] = j
            keys[m] = [prefix, (r * width + at, r * width + at + s)]
            at += s
            rows[m], cols[m] = r, at - 1
    seg_t = to_device(seg, device)
    q, k = seg_t[:, :, None], seg_t[:, None, :]
    where = torch.arange(width, device=device)
    causal = where[:, None] >= where[None, :]
    # A token sees its own segment (padding sees padding, so no row is empty) and a suffix sees
    # the prefix; causal order on top.
    mask = ((q == k) | ((k == 0) & (q > 0))) & causal
    # As the additive mask SDPA would make of the boolean one (0 / -inf in the query's dtype), once
    # here rather than in each of the 36 layers (H200 profile: 4 % of the 8B blind device time).
    # Its rows are laid out 16 apart: the memory-efficient kernel otherwise copies the mask into
    # such a layout in every layer.
    row = -(-width // 16) * 16
    additive = torch.full((b, width, row), float("-inf"), dtype=dtype, device=device)[..., :width]
    additive.masked_fill_(mask, 0.0)
    return PackedBatch(
        to_device(ids, device),
        to_device(types, device),
        additive[:, None],
        to_device(pos, device),
        pixel_values,
        grid,
        to_device(rows, device),
        to_device(cols, device),
        host_grid,
        scored=Scored.from_spans((rows * width + cols).tolist(), keys, device),
    )


@torch.inference_mode()
def packed_logprobs(model: Any, batch: PackedBatch, scored_only: bool = False) -> torch.Tensor:
    """(N, vocab) float32 log-softmax at each request's last position; with ``scored_only`` the
    last decoder layer runs at those positions only (``model.scored``, where installed)."""
    kw: dict[str, Any] = {"input_ids": batch.input_ids, "mm_token_type_ids": batch.mm_token_type_ids}
    scored = batch.scored if scored_only and installed(model) else None
    if scored is not None:
        kw["scored"] = scored
    if batch.pixel_values is not None:
        kw["pixel_values"] = batch.pixel_values
        kw["image_grid_thw"] = batch.image_grid_thw
        if batch.host_grid is not None:
            kw.update(vision_inputs(model, batch.host_grid))
    if batch.varlen is not None:  # one row: no mask, three position rows (transformers builds no mask)
        out = model.model(**kw, attention_mask=None, position_ids=batch.position_ids, use_cache=False,
                          varlen_plan=batch.varlen)
    else:
        with masked_attention_kernels(batch.input_ids.device):  # the tree mask
            out = model.model(**kw, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                              use_cache=False)
    # (N, hidden): only the scored positions (the scored last layer returned only those)
    hidden = out.last_hidden_state[0] if scored is not None else out.last_hidden_state[batch.rows, batch.cols]
    return torch.log_softmax(model.lm_head(hidden).float(), dim=-1)
