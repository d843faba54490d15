"""Useful FLOPs of Qwen3-VL scoring forwards (multiply-add = 2): every linear layer of the language
model per prompt token; causal attention 4 * heads * head_dim * L(L+1)/2 per layer; the output
layer at the one scored position; the vision tower's linears per patch (blocks, patch embedding)
and per merged token (mergers); its full attention 4 * hidden * P^2 per image and layer. Padding,
extra output-layer rows and anything not needed for the answer do not count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchcheck.engines.hf.forward.packed import Family
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.families import packed_length

Grid = tuple[int, int, int]


def grids_of(p: EncodedPrompt) -> list[Grid]:
    g = p.image_grid_thw
    return [(int(x[0]), int(x[1]), int(x[2])) for x in g] if g is not None else []


def item_flops(cfg: Any, n_tokens: int, grids: Sequence[Grid]) -> float:
    """Useful model FLOPs of one scoring forward (see the module docstring)."""
    t, v = cfg.text_config, cfg.vision_config
    q, kv = t.num_attention_heads * t.head_dim, t.num_key_value_heads * t.head_dim
    layer = t.hidden_size * (2 * q + 2 * kv) + 3 * t.hidden_size * t.intermediate_size
    flops = 2.0 * layer * t.num_hidden_layers * n_tokens
    flops += 4.0 * q * t.num_hidden_layers * n_tokens * (n_tokens + 1) / 2
    flops += 2.0 * t.hidden_size * t.vocab_size
    m2 = v.spatial_merge_size**2
    for gt, gh, gw in grids:
        p = gt * gh * gw
        block = 4 * v.hidden_size**2 + 2 * v.hidden_size * v.intermediate_size
        embed = v.in_channels * v.temporal_patch_size * v.patch_size**2 * v.hidden_size
        merger = (v.hidden_size * m2) ** 2 + v.hidden_size * m2 * v.out_hidden_size
        flops += 2.0 * (block * v.depth + embed) * p
        flops += 2.0 * merger * (1 + len(v.deepstack_visual_indexes)) * p / m2
        flops += 4.0 * v.hidden_size * p * p * v.depth
    return float(flops)


def flops_unshared(cfg: Any, prompts: Sequence[EncodedPrompt]) -> float:
    return sum(item_flops(cfg, p.n_tokens, grids_of(p)) for p in prompts)


def flops_shared(cfg: Any, prompts: Sequence[EncodedPrompt], fams: Sequence[Family]) -> float:
    """Useful FLOPs when each family's prefix is computed once: linear layers per packed token;
    attention of the prefix (causal) and of each suffix over prefix + its own earlier tokens."""
    t = cfg.text_config
    q, kv = t.num_attention_heads * t.head_dim, t.num_key_value_heads * t.head_dim
    layer = t.hidden_size * (2 * q + 2 * kv) + 3 * t.hidden_size * t.intermediate_size
    total = 0.0
    for f in fams:
        first = prompts[f.members[0]]
        vision = item_flops(cfg, 0, grids_of(first)) - 2.0 * t.hidden_size * t.vocab_size
        p = f.prefix
        pairs = p * (p + 1) / 2
        for m in f.members:
            s = prompts[m].n_tokens - p
            pairs += s * p + s * (s + 1) / 2
        total += vision + 2.0 * layer * t.num_hidden_layers * packed_length(prompts, f)
        total += 4.0 * q * t.num_hidden_layers * pairs + 2.0 * t.hidden_size * t.vocab_size * len(f.members)
    return total
