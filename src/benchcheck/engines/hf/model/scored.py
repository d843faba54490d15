"""The language model's last decoder layer at the scored positions only.

A scoring forward reads one position per request (its last token). Every layer before the last
feeds the keys and values of all positions to the layers after it, but the last one feeds only
the final norm and the LM head: of it, only the keys and values of all positions are needed (the
scored queries attend to them), and the query, attention output, output projection and MLP at
the scored positions alone. For the 8B model that skips 96 % of one layer in 36 (about 2.7 % of
the language model's work; more on models with fewer layers).

``Scored`` says, for each scored token, where it lies in the forward's hidden states (flattened
rows) and which positions it attends to (its own prompt's tokens up to itself: a right-padded
row's real tokens, a packed family's prefix and the member's own suffix). The layer then runs
one grouped attention with a single query per request: the query heads sharing a K/V head are
the "queries" of one SDPA row, over that request's keys (a boolean mask marks the real ones).
The result has the same function as the full layer at those positions; only the attention's
reduction order can differ.

A generation's prefill (``forward.generate``, rows padded on the right or not at all) passes its
KV cache too: the layer writes every position's keys and values there, as the full layer does,
and computes the rest at each row's last real token alone, the one whose logits pick the first new token. At the
sweep's 54,000-token prompts that skips one layer's attention in 36, the costliest part.

The layer's output is (1, N, hidden), one row per scored request in request order; the model's
final norm runs on it, and the caller reads ``last_hidden_state[0]``. Installed on one model
instance (``use_scored_last_layer``); a forward without ``scored=`` runs the layer unchanged.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchcheck.engines.hf.attention.sdpa import decode_kernels
from benchcheck.engines.hf.model.fused import EAGER_ROWS, mlp_residual, norm_rope
from benchcheck.engines.hf.model.state import ModelState, state_of
from benchcheck.engines.hf.runtime.transfer import to_device

LAYER_CLASS = "Qwen3VLTextDecoderLayer"
ATTENTION_CLASS = "Qwen3VLTextAttention"


@dataclass(frozen=True, slots=True)
class Scored:
    """The scored tokens of one forward: flat positions into its (rows x width) hidden states."""

    query: torch.Tensor  # (N,) int64: each scored token, in request order
    keys: torch.Tensor  # (N, W) int64: the positions it attends to (unused slots repeat a real one)
    valid: torch.Tensor  # (N, W) bool: which of ``keys`` are real

    @staticmethod
    def from_spans(query: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]], device: torch.device) -> Scored:
        """Scored tokens at flat ``query`` positions, each attending to its ``[lo, hi)`` spans of
        flat positions (in order; its own position last)."""
        lens = [sum(hi - lo for lo, hi in s) for s in spans]
        width = max(lens, default=1)
        keys = np.zeros((len(spans), width), np.int64)
        valid = np.zeros((len(spans), width), bool)
        for n, (s, length) in enumerate(zip(spans, lens, strict=True)):
            row = np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in s])
            keys[n, :length], keys[n, length:] = row, row[-1]
            valid[n, :length] = True
        return Scored(to_device(np.asarray(query, np.int64), device), to_device(keys, device),
                      to_device(valid, device))

    @staticmethod
    def right_padded(lengths: Sequence[int], width: int, device: torch.device) -> Scored:
        """Rows of ``width`` right-padded to ``lengths`` real tokens: each row's last real token,
        attending to its row's real tokens."""
        n = len(lengths)
        keys = np.arange(n, dtype=np.int64)[:, None] * width + np.arange(width, dtype=np.int64)[None]
        valid = np.arange(width)[None] < np.asarray(lengths)[:, None]
        query = np.arange(n, dtype=np.int64) * width + np.asarray(lengths, np.int64) - 1
        return Scored(to_device(query, device), to_device(keys, device), to_device(valid, device))


def use_scored_last_layer(model: Any) -> bool:
    """Let ``model``'s last text decoder layer take ``scored=``; True when it can: a Qwen3-VL
    decoder layer that no DeepStack addition follows (the model's loop would add image
    features to its full-width output)."""
    lm = model.model.language_model
    layers = getattr(lm, "layers", None)
    if not layers or type(layers[-1]).__name__ != LAYER_CLASS:
        return False
    if type(layers[-1].self_attn).__name__ != ATTENTION_CLASS:
        return False
    deepstack = getattr(model.config.vision_config, "deepstack_visual_indexes", None) or ()
    if len(deepstack) >= len(layers):
        return False
    layer = layers[-1]
    state = state_of(model)
    if layer not in state.full_forward:  # installed once: unscored calls take
        state.full_forward[layer] = layer.forward  # the forward it had (transformers' or model.fused's layer)
    layer.forward = types.MethodType(_scored_forward(state), layer)
    return True


def installed(model: Any) -> bool:
    """``use_scored_last_layer`` took on ``model``."""
    return bool(state_of(model).full_forward)


def _scored_forward(state: ModelState) -> Callable[..., torch.Tensor]:
    """The last layer's forward over ``state`` (see the module's docstring)."""

    def forward(self: Any, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                past_key_values: Any = None, use_cache: bool | None = False, scored: Scored | None = None,
                **kwargs: Any) -> torch.Tensor:
        if scored is None:
            return state.full_forward[self](hidden_states, position_embeddings, attention_mask=attention_mask,  # type: ignore[no-any-return]
                                            position_ids=position_ids, past_key_values=past_key_values,
                                            use_cache=use_cache, **kwargs)
        return _at_scored(self, state, hidden_states, position_embeddings, scored, past_key_values)

    return forward


def _at_scored(self: Any, state: ModelState, hidden_states: torch.Tensor,
               position_embeddings: tuple[torch.Tensor, torch.Tensor], scored: Scored,
               cache: Any = None) -> torch.Tensor:
    attn = self.self_attn
    d, hd = hidden_states.shape[-1], attn.head_dim
    flat = hidden_states.reshape(-1, d)
    x = self.input_layernorm(hidden_states).reshape(1, -1, d)  # every position: the keys need it
    cos, sin = (t.reshape(1, -1, hd) for t in position_embeddings)
    rope = state.norm_rope if x.shape[1] >= EAGER_ROWS else None
    k = (rope or norm_rope)(attn.k_proj(x).view(1, x.shape[1], -1, hd), attn.k_norm.weight,
                            attn.k_norm.variance_epsilon, cos, sin)[0]  # (T, Hk, D)
    v = attn.v_proj(x).view(x.shape[1], -1, hd)
    if cache is not None:
        # A generation's prefill: the decode steps after it attend to every position's keys and
        # values of this layer too, so they go into the cache as the full layer would put them.
        rows, width = hidden_states.shape[0], hidden_states.shape[1]
        cache.update(k.view(rows, width, -1, hd).transpose(1, 2), v.view(rows, width, -1, hd).transpose(1, 2),
                     attn.layer_idx)
    at = scored.query
    q = norm_rope(attn.q_proj(x[0, at]).view(1, len(at), -1, hd), attn.q_norm.weight, attn.q_norm.variance_epsilon,
                  cos[:, at], sin[:, at])[0]  # (N, H, D)
    n, heads, kv_heads = q.shape[0], q.shape[1], k.shape[1]
    # One query position per request: the query heads of one K/V head are the rows of one SDPA
    # problem over that request's keys.
    qg = q.view(n, kv_heads, heads // kv_heads, hd)
    kk = k[scored.keys].transpose(1, 2)  # (N, Hk, W, D)
    vv = v[scored.keys].transpose(1, 2)
    # In a generation's prefill, without cuDNN: its key length is new at almost every call, and
    # cuDNN would build a plan for it on the host while the device waits, as for decode steps.
    with decode_kernels(cache is not None):
        out = F.scaled_dot_product_attention(qg, kk, vv, attn_mask=scored.valid[:, None, None, :],
                                             scale=attn.scaling)
    h = flat[at] + attn.o_proj(out.reshape(n, heads * hd))
    h = mlp_residual(self.mlp, self.post_attention_layernorm(h), h, state)
    out_rows: torch.Tensor = h[None]
    return out_rows
