"""Qwen3-VL configurations built in code: the two real shapes (docs/PROTOCOL.md, "Model shapes") and the tiny one.

One function turns a :class:`Shape` into a ``Qwen3VLConfig``, so the tiny model and the
random-weight replicas differ only in their numbers, never in how they are wired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONTEXT_TOKENS = 65536  # the sweep servers' --max-model-len; the tiny model holds as much
ROPE_THETA = 5_000_000.0

# The image processor of Qwen3-VL with its real settings: 16-px patches, 2x2 merge, 2 frames per
# temporal patch, so one LLM token per 32x32 pixels (a 448x256 frame costs 112 tokens).
PREPROCESSOR_CONFIG: dict[str, Any] = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "do_resize": True,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "do_convert_rgb": True,
    "resample": 3,
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen3VLProcessor",
}


@dataclass(frozen=True, slots=True)
class Shape:
    """The numbers that define a Qwen3-VL model; everything else is shared."""

    hidden: int
    layers: int
    mlp: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    mrope_section: tuple[int, int, int]
    vision_depth: int
    vision_hidden: int
    vision_mlp: int
    vision_heads: int
    deepstack: tuple[int, ...]
    vocab: int = 151936


# docs/PROTOCOL.md, "Model shapes".
SHAPES: dict[str, Shape] = {
    "qwen3-vl-8b": Shape(
        hidden=4096, layers=36, mlp=12288, heads=32, kv_heads=8, head_dim=128, tied=False,
        mrope_section=(24, 20, 20), vision_depth=27, vision_hidden=1152, vision_mlp=4304,
        vision_heads=16, deepstack=(8, 16, 24),
    ),
    "qwen3-vl-2b": Shape(
        hidden=2048, layers=28, mlp=6144, heads=16, kv_heads=8, head_dim=128, tied=True,
        mrope_section=(24, 20, 20), vision_depth=24, vision_hidden=1024, vision_mlp=4096,
        vision_heads=16, deepstack=(5, 11, 17),
    ),
}  # fmt: skip


def config_dict(shape: Shape, special_ids: dict[str, int], eos_id: int, pad_id: int) -> dict[str, Any]:
    """The ``config.json`` content of a Qwen3-VL model of ``shape``.

    ``special_ids`` maps ``image``, ``video``, ``vision_start`` and ``vision_end`` to token ids.
    """
    return {
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "image_token_id": special_ids["image"],
        "video_token_id": special_ids["video"],
        "vision_start_token_id": special_ids["vision_start"],
        "vision_end_token_id": special_ids["vision_end"],
        "tie_word_embeddings": shape.tied,
        "text_config": {
            "model_type": "qwen3_vl_text",
            "vocab_size": shape.vocab,
            "hidden_size": shape.hidden,
            "intermediate_size": shape.mlp,
            "num_hidden_layers": shape.layers,
            "num_attention_heads": shape.heads,
            "num_key_value_heads": shape.kv_heads,
            "head_dim": shape.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": CONTEXT_TOKENS,
            "rms_norm_eps": 1e-6,
            "attention_bias": False,
            "tie_word_embeddings": shape.tied,
            "bos_token_id": eos_id,
            "eos_token_id": eos_id,
            "pad_token_id": pad_id,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": ROPE_THETA,
                "mrope_section": list(shape.mrope_section),
                "mrope_interleaved": True,
            },
        },
        "vision_config": {
            "model_type": "qwen3_vl_vision",
            "depth": shape.vision_depth,
            "hidden_size": shape.vision_hidden,
            "intermediate_size": shape.vision_mlp,
            "num_heads": shape.vision_heads,
            "out_hidden_size": shape.hidden,
            "patch_size": PREPROCESSOR_CONFIG["patch_size"],
            "spatial_merge_size": PREPROCESSOR_CONFIG["merge_size"],
            "temporal_patch_size": PREPROCESSOR_CONFIG["temporal_patch_size"],
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": list(shape.deepstack),
            "hidden_act": "gelu_pytorch_tanh",
            "in_channels": 3,
        },
    }
