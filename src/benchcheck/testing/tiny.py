"""``build_tiny_model``: a random-weight Qwen3-VL checkpoint folder small enough for every test.

The folder is what ``from_pretrained`` expects of the real model (``config.json``, safetensors
weights, tokenizer with the Qwen chat and vision special tokens, a ChatML chat template, the real
image processor settings), with tiny dimensions. Weights come from NumPy's PCG64 generator, so a
seed gives the same bytes on every machine and torch version.

Random weights alone would put no letter in the top 20, leaving every margin at 0; a planted
letter prior fixes that. Every token embedding carries a constant on channel 0 (the residual
stream keeps it to the last layer), and the output rows of the letter tokens read that channel
with a per-letter weight drawn from the seed. Letters therefore lead the top 20 with varied
margins, while the random part of the network still moves the scores with the input.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchcheck.atomic import write_text_atomic
from benchcheck.engines.marker import CONFIG_KEY, marker_record, write_marker
from benchcheck.engines.transformers_lib import transformers_module
from benchcheck.protocol import LETTERS
from benchcheck.testing.config import PREPROCESSOR_CONFIG, Shape, config_dict
from benchcheck.testing.tokenizer import SPECIAL_TOKENS, write_tokenizer

TINY = Shape(
    hidden=64, layers=2, mlp=128, heads=4, kv_heads=2, head_dim=16, tied=False,
    mrope_section=(2, 3, 3), vision_depth=2, vision_hidden=32, vision_mlp=64,
    vision_heads=2, deepstack=(1,), vocab=0,
)  # fmt: skip

_INIT_STD = 0.05
_OUTPUT_STD = 0.5  # wider than the rest so that inputs visibly move the scores
_PRIOR = 3.0  # the constant every embedding carries on channel 0
_LETTER_BIAS = (3.0, 6.0)  # logit bias range of "A".."Z" (before the final norm's scaling)
_SPACE_DROP = (0.5, 2.0)  # " A" variants sit this much lower than "A"


def special_ids(first_special: int) -> dict[str, int]:
    """Token ids of the special tokens by short name, given the id of ``<|endoftext|>``."""
    ids = {t.strip("<|>"): first_special + i for i, t in enumerate(SPECIAL_TOKENS)}
    return {
        "endoftext": ids["endoftext"],
        "im_end": ids["im_end"],
        "image": ids["image_pad"],
        "video": ids["video_pad"],
        "vision_start": ids["vision_start"],
        "vision_end": ids["vision_end"],
    }


def _param_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of the model ``cfg`` describes, without allocating it."""
    import torch

    tf = transformers_module()
    with torch.device("meta"):
        model = tf.Qwen3VLForConditionalGeneration(tf.Qwen3VLConfig(**cfg))
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def _init_weights(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    """Norm scales 1, biases 0, every other weight N(0, std); one generator, names in order."""
    rng = np.random.Generator(np.random.PCG64(seed))
    out: dict[str, np.ndarray] = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if len(shape) == 1 and "norm" in name and name.endswith(".weight"):
            out[name] = np.ones(shape, np.float32)
        elif len(shape) == 1:
            out[name] = np.zeros(shape, np.float32)
        else:
            std = _OUTPUT_STD if name == "lm_head.weight" else _INIT_STD
            out[name] = rng.normal(0.0, std, size=shape).astype(np.float32)
    return out


def _letter_token_ids(tokenizer_json: dict[str, object]) -> dict[str, int]:
    """Ids of ``"A".."Z"`` and of ``" A".." Z"`` (as byte-level ``"ĠA"``) where they exist."""
    model = tokenizer_json["model"]
    assert isinstance(model, dict)
    vocab: dict[str, int] = model["vocab"]
    found = {c: vocab[c] for c in LETTERS if c in vocab}
    found |= {" " + c: vocab["Ġ" + c] for c in LETTERS if "Ġ" + c in vocab}
    return found


def _plant_letter_prior(w: dict[str, np.ndarray], letters: dict[str, int], seed: int) -> None:
    emb = w["model.language_model.embed_tokens.weight"]
    head = w["lm_head.weight"]
    emb[:, 0] = _PRIOR
    head[:, 0] = 0.0
    # A separate stream, so the prior does not shift when the network's size changes.
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    bias = {c: rng.uniform(*_LETTER_BIAS) for c in LETTERS}
    drop = {c: rng.uniform(*_SPACE_DROP) for c in LETTERS}
    # After the final RMS norm channel 0 is about sqrt(hidden) times larger than the rest.
    scale = 1.0 / np.sqrt(emb.shape[1])
    for tok, tid in letters.items():
        c = tok.strip()
        head[tid, 0] = (bias[c] - (drop[c] if tok.startswith(" ") else 0.0)) * scale


def build_tiny_model(out: Path, seed: int = 0, shape: Shape = TINY) -> Path:
    """Write a tiny random-weight Qwen3-VL checkpoint folder into ``out``; return ``out``.

    Byte-deterministic for a seed; a few MB; built in about a second. The folder carries the
    random-weight marker (:mod:`benchcheck.engines.marker`). ``shape``: other numbers of the
    same wiring (the benchmarks' narrow models of a real model's depth); its vocabulary is the
    tokenizer's, always.
    """
    from safetensors.numpy import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    first = write_tokenizer(out)
    ids = special_ids(first)
    vocab = -(-(first + len(SPECIAL_TOKENS)) // 64) * 64
    shape = dataclasses.replace(shape, vocab=vocab)
    cfg = config_dict(shape, ids, eos_id=ids["im_end"], pad_id=ids["endoftext"])
    marker = marker_record("tiny", seed)
    weights = _init_weights(_param_shapes(cfg), seed)
    tok = json.loads((out / "tokenizer.json").read_text())
    _plant_letter_prior(weights, _letter_token_ids(tok), seed)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_text_atomic(out / "config.json", json.dumps({**cfg, CONFIG_KEY: marker}, sort_keys=True, indent=2) + "\n")
    write_marker(out, marker)  # what the report reads to label the rows as noise (engines.models.marker)
    gen = {"do_sample": False, "eos_token_id": [ids["im_end"], ids["endoftext"]], "pad_token_id": ids["endoftext"]}
    write_text_atomic(out / "generation_config.json", json.dumps(gen, sort_keys=True, indent=2) + "\n")
    preprocessor = json.dumps(PREPROCESSOR_CONFIG, sort_keys=True, indent=2) + "\n"
    write_text_atomic(out / "preprocessor_config.json", preprocessor)
    return out
