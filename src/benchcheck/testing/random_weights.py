"""Random-weight Qwen3-VL models with the true shapes (docs/PROTOCOL.md, "Model shapes"), built on the device.

Sixteen gigabytes of weights cannot travel to a GPU machine, and the benchmarks need the
compute of the real models, not their answers: the model is instantiated directly on the device
from a configuration built in code, with random weights, next to a tokenizer whose special
tokens carry the real ids (151643 ...) and the real image processor settings.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.transformers_lib import transformers_module
from benchcheck.testing.config import PREPROCESSOR_CONFIG, SHAPES, config_dict
from benchcheck.testing.tiny import special_ids
from benchcheck.testing.tokenizer import QWEN_FIRST_SPECIAL_ID, write_tokenizer


@dataclass(slots=True)
class RandomModel:
    """A model in memory with what the ``hf`` engine needs to run it."""

    shape: str
    model: Any
    tokenizer: Any
    preprocessor_config: dict[str, Any]

    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def build_random_model(
    shape: str, device: str = "cuda", dtype: torch.dtype = torch.bfloat16, seed: int = 0
) -> RandomModel:
    """Build ``shape`` (``qwen3-vl-8b`` or ``qwen3-vl-2b``) with random weights on ``device``."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    tf = transformers_module()
    with tempfile.TemporaryDirectory() as tmp:
        first = write_tokenizer(Path(tmp), first_special_id=QWEN_FIRST_SPECIAL_ID)
        tokenizer = tf.AutoTokenizer.from_pretrained(tmp)
    ids = special_ids(first)
    config = tf.Qwen3VLConfig(**config_dict(SHAPES[shape], ids, eos_id=ids["im_end"], pad_id=ids["endoftext"]))
    torch.manual_seed(seed)
    # Allocated and initialised on the device itself: no host copy of the weights ever exists.
    with torch.device(device):
        model = tf.Qwen3VLForConditionalGeneration._from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.generation_config.eos_token_id = [ids["im_end"], ids["endoftext"]]
    model.generation_config.pad_token_id = ids["endoftext"]
    return RandomModel(shape, model.eval(), tokenizer, dict(PREPROCESSOR_CONFIG))
