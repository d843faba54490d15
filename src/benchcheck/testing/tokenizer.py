"""A small byte-level BPE tokenizer in the layout of Qwen's, trained here from a fixed corpus.

Qwen's tokenizer splits text with one regex, maps bytes to printable characters (byte-level BPE)
and keeps its chat and vision markers as special tokens after the ordinary vocabulary, in a fixed
order. This module reproduces that layout at a small size, so the tiny model renders prompts the
way the real one does: the same chat markers, the same vision placeholders, letters with and
without a leading space as single tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from benchcheck.atomic import write_text_atomic
from benchcheck.protocol import LETTERS, PROMPT, PROMPT_OPT_ONLY

# Qwen's special tokens in the order of their ids (151643 ... 151656 on the real models).
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
QWEN_FIRST_SPECIAL_ID = 151643  # where the real models' special tokens start

# Qwen2's pre-tokenizer split (letters, numbers one digit at a time, punctuation runs, spaces).
_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# The shape of Qwen3-VL's own template: ChatML turns; a user turn's images first as
# <|vision_start|><|image_pad|><|vision_end|>, then its text; no default system prompt; an
# assistant turn may be the prefilled, continued last message.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}"
    "{{- message['content'] -}}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' or 'video' in part -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in part -%}"
    "{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)

_WORD_TEXT = (
    "the a an of to in on at for with from by what which who where when how why is are was were "
    "does do did video clip frame scene person man woman people child dog cat car ball table "
    "door room kitchen street water light hand head red blue green yellow black white left right "
    "up down first second third last before after during while then next opens closes picks puts "
    "holds walks runs jumps sits stands looks turns moves throws catches cuts pours eats drinks "
    "reads writes plays sings talks happens object action event number count many few none all "
    "some color shape size large small long short fast slow near far inside outside top bottom "
    "front back answer question option options letter only choose best correct true false yes no"
)
_WORDS = _WORD_TEXT.split()


def _corpus() -> list[str]:
    """A fixed training corpus: protocol prompts, plain words, and every letter many times
    with and without a leading space (so ``"A"`` and ``" A"`` become single tokens)."""
    lines: list[str] = []
    for i, w in enumerate(_WORDS):
        opts = [_WORDS[(i + k * 7) % len(_WORDS)] for k in range(5)]
        options = "\n".join(f"{LETTERS[k]}. {o}" for k, o in enumerate(opts))
        q = f"What does the {w} do in the video?"
        lines.append(PROMPT.format(intro="Look at the frames.", q=q, opts=options))
        lines.append(PROMPT_OPT_ONLY.format(intro="Pick one option.", opts=options))
        lines.append(" ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(12)) + ".")
    letters = " ".join(LETTERS)
    lines += [f"Answer: {letters}\n{''.join(LETTERS)}\n({letters})"] * 40
    lines += [f"Answer: {c}\nAnswer:{c}\n{c}." for c in LETTERS] * 8
    lines += [" ".join(str(n) for n in range(100))] * 4
    return lines


def train_tokenizer(vocab_size: int = 1024) -> Tokenizer:
    """Train the byte-level BPE (deterministic: a fixed corpus, one thread's merge order)."""
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return tok


def tokenizer_json(first_special_id: int | None = None, vocab_size: int = 1024) -> dict[str, object]:
    """The trained tokenizer as ``tokenizer.json`` content, special tokens appended.

    ``first_special_id``: id of ``<|endoftext|>``; ``None`` puts the specials right after the
    trained vocabulary (tiny model); ``QWEN_FIRST_SPECIAL_ID`` pads the vocabulary with
    unreachable filler entries so every special token has the real models' id.
    """
    data: dict[str, object] = json.loads(train_tokenizer(vocab_size).to_str())
    model = data["model"]
    assert isinstance(model, dict)
    vocab: dict[str, int] = model["vocab"]
    n = len(vocab)
    start = n if first_special_id is None else first_special_id
    if start < n:
        raise ValueError(f"first special id {start} is inside the trained vocabulary of {n}")
    # Filler entries are never produced: no merge rule builds them.
    for i in range(n, start):
        vocab[f"<|filler_{i}|>"] = i
    data["added_tokens"] = [
        {
            "id": start + k,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for k, t in enumerate(SPECIAL_TOKENS)
    ]
    return data


def write_tokenizer(out: Path, first_special_id: int | None = None) -> int:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``chat_template.jinja`` into
    ``out``; return the id of the first special token (``<|endoftext|>``)."""
    data = tokenizer_json(first_special_id)
    write_text_atomic(out / "tokenizer.json", json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1))
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 65536,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
    }
    write_text_atomic(out / "tokenizer_config.json", json.dumps(config, sort_keys=True, indent=1) + "\n")
    write_text_atomic(out / "chat_template.jinja", CHAT_TEMPLATE)
    added = data["added_tokens"]
    assert isinstance(added, list)
    first: int = added[0]["id"]
    return first
