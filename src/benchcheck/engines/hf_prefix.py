"""Exact prefix sharing for the ``hf`` engine's scoring forwards.

Step 1 asks each question under 4 option permutations: the 4 prompts share every token up to
the first option that differs (chat template, intro, question), often more than half of each
prompt. Requests whose token ids start the same are grouped into *families*; a family runs as one
packed row: the common prefix once, then each member's remaining tokens (its *suffix*) as a
continuation of it. A tree-shaped attention mask lets every suffix token see the prefix and the
earlier tokens of its own suffix, and nothing of the other suffixes; each token keeps the
position it has in its own full prompt. So every member's last position sees exactly the keys,
values and positions of its unshared forward: the same function, computed with fewer tokens
(only the reduction order of the attention can differ). Images are shared too when they all lie
inside the prefix (the vision tower then runs once per family): the questions asked of one
video's frames share the template, the frames and the intro.

Unlike vLLM's automatic prefix caching (whole 16-token blocks), the split is token-exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchcheck.engines.hf_config import DEFAULTS
from benchcheck.engines.hf_inputs import EncodedPrompt
from benchcheck.engines.hf_pixels import PixelSpec, patchify
from benchcheck.engines.hf_scored import Scored, installed
from benchcheck.engines.hf_sdpa import masked_attention_kernels
from benchcheck.engines.hf_transfer import to_device
from benchcheck.engines.hf_varlen import VarlenPlan, build_plan
from benchcheck.engines.hf_vision import vision_inputs

MIN_SHARED = 8  # tokens; a shorter common prefix saves less than the mask and bookkeeping cost
MAX_FAMILY = 16  # members per packed row


@dataclass(frozen=True, slots=True)
class Family:
    """Requests (indices into the batch) that share their first ``prefix`` tokens."""

    members: tuple[int, ...]
    prefix: int


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common start of two token arrays."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def plan_families(prompts: Sequence[EncodedPrompt], min_shared: int = MIN_SHARED,
                  max_family: int = MAX_FAMILY, share_frames: bool = True) -> list[Family]:
    """Group ``prompts`` into families (every prompt in exactly one; ordered by first member).

    Prompts are sorted by the images they name (``EncodedPrompt.frames_key``), then by their
    token ids, so prompts sharing a prefix are neighbours (questions about the same frames too:
    in token ids every image's placeholders are alike, and the question after them would decide),
    and the common prefix of a run of neighbours is the smallest common prefix of adjacent ones. The runs
    are chosen to save the most tokens (a family of c members sharing n tokens saves (c-1)*n): a
    chat template common to all items does not swallow the families that share whole questions.
    A family shares at least ``min_shared`` tokens, holds every image whole inside its prefix (the
    images being equal), and stops one token short of its shortest member, so that every member
    keeps its scored last position (identical prompts share all but their last token). A lone
    prompt is a family of one.
    """
    order = sorted(range(len(prompts)), key=lambda i: (prompts[i].frames_key if share_frames else b"",
                                                       prompts[i].input_ids.tolist()))
    ps = [prompts[i] for i in order]
    # lcp[j]: common prefix of sorted neighbours j-1 and j (0 when their images differ).
    lcp = [0] + [common_prefix(ps[j - 1].input_ids, ps[j].input_ids) if _same_frames(ps[j - 1], ps[j]) else 0
                 for j in range(1, len(ps))]
    # The last image token of each prompt (-1: none): a shared prefix must reach past it.
    last_image = [int(np.flatnonzero(p.mm_token_type_ids != 0)[-1]) if p.frames else -1 for p in ps]
    best = [0] * (len(ps) + 1)  # best[i]: most tokens saved over the first i sorted prompts
    cut: list[tuple[int, int]] = [(0, 0)] * (len(ps) + 1)  # (family start, its prefix) at best[i]
    for end in range(1, len(ps) + 1):
        best[end], cut[end] = best[end - 1], (end - 1, ps[end - 1].n_tokens - 1)  # alone (``lone_families``)
        n = ps[end - 1].n_tokens - 1
        image_end = last_image[end - 1]
        for start in range(end - 2, max(-1, end - 1 - max_family), -1):
            n = min(n, lcp[start + 1], ps[start].n_tokens - 1)
            image_end = max(image_end, last_image[start])
            if n < min_shared or image_end >= n:
                break  # n only shrinks as the run grows: no longer run can qualify
            gain = best[start] + (end - start - 1) * n
            if gain > best[end]:
                best[end], cut[end] = gain, (start, n)
    families: list[Family] = []
    end = len(ps)
    while end > 0:
        start, n = cut[end]
        families.append(Family(tuple(order[start:end]), n))
        end = start
    families.sort(key=lambda f: min(f.members))
    return families


def _same_frames(a: EncodedPrompt, b: EncodedPrompt) -> bool:
    """Equal images (only then may a prefix holding them be shared)."""
    if len(a.frames) != len(b.frames):
        return False
    return all(x is y or (x.shape == y.shape and np.array_equal(x, y)) for x, y in zip(a.frames, b.frames, strict=True))


def plan_family_batches(prompts: Sequence[EncodedPrompt], families: Sequence[Family], max_requests: int,
                        max_tokens: int) -> list[list[Family]]:
    """Families grouped into batches by packed length (less padding), each batch at most
    ``max_requests`` requests and ``max_tokens`` padded tokens (a larger family goes alone)."""
    lengths = [packed_length(prompts, f) for f in families]
    order = sorted(range(len(families)), key=lambda i: (lengths[i], i))
    batches: list[list[Family]] = []
    cur: list[Family] = []
    count = 0
    for i in order:
        fam = families[i]
        if cur and (count + len(fam.members) > max_requests or lengths[i] * (len(cur) + 1) > max_tokens):
            batches.append(cur)
            cur, count = [], 0
        cur.append(fam)
        count += len(fam.members)
    if cur:
        batches.append(cur)
    return batches


def packed_length(prompts: Sequence[EncodedPrompt], fam: Family) -> int:
    """Tokens of a family's packed row: the prefix once, then every member's suffix."""
    return fam.prefix + sum(prompts[i].n_tokens - fam.prefix for i in fam.members)


def lone_families(prompts: Sequence[EncodedPrompt]) -> list[Family]:
    """Every prompt a family of its own (all but its scored last token as its "prefix"), as
    ``plan_families`` makes a prompt that shares nothing: a batch packed without padding."""
    return [Family((i,), p.n_tokens - 1) for i, p in enumerate(prompts)]


def worth_sharing(families: Sequence[Family]) -> bool:
    """Share when some family has two or more members (else the plain causal forward is used)."""
    return any(len(f.members) > 1 for f in families)


@dataclass(slots=True)
class PackedBatch:
    """Model inputs of packed families, and where each request is scored. Two layouts: one
    left-padded row per family with a dense tree mask, or (``varlen``) every family in ONE row,
    no padding, no mask, attention cut into sequences by ``hf_varlen``."""

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
    scored: Scored | None = None  # each request's scored token and its keys (hf_scored), request order


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
         pixels: PixelSpec, dtype: torch.dtype, one_row: bool = False,
         triton_max_keys: int = DEFAULTS.varlen_triton_max_keys) -> PackedBatch:
    """The families packed on the device of ``pixels``: one left-padded row each with the tree
    mask, or with ``one_row`` all in one row for ``hf_varlen``'s tree attention (its Triton kernel
    for rows of keys up to ``triton_max_keys``, ``VarlenPlan``)."""
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
        plan = build_plan(spans, device, triton_max_keys)
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
    last decoder layer runs at those positions only (``hf_scored``, where installed)."""
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
