"""The tiny Qwen3-VL builder: deterministic, small, loadable, with a planted letter prior."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from benchcheck.engines.base import LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.protocol import LETTERS, letter_logprobs
from benchcheck.testing import build_tiny_model
from benchcheck.testing.tokenizer import SPECIAL_TOKENS

QUESTION = (
    "Question: what happens first?\nOptions:\nA. red\nB. blue\nC. green\nD. black\nAnswer with the option letter only."
)


def digests(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())}


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path, tiny_model: Path) -> None:
    t0 = time.perf_counter()
    again = build_tiny_model(tmp_path / "again", seed=0)
    elapsed = time.perf_counter() - t0
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert digests(again) == digests(tiny_model)
    assert digests(other)["model.safetensors"] != digests(tiny_model)["model.safetensors"]
    assert digests(other)["tokenizer.json"] == digests(tiny_model)["tokenizer.json"]
    assert elapsed < 30
    assert sum(f.stat().st_size for f in tiny_model.iterdir()) < 5_000_000


def test_from_pretrained_loads_the_folder(tiny_model: Path) -> None:
    from transformers import AutoTokenizer, Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    cfg = model.config
    assert cfg.text_config.max_position_embeddings == 65536
    for name in SPECIAL_TOKENS:
        assert len(tok(name, add_special_tokens=False)["input_ids"]) == 1, name
    assert cfg.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert cfg.video_token_id == tok.convert_tokens_to_ids("<|video_pad|>")
    assert cfg.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    assert cfg.vision_end_token_id == tok.convert_tokens_to_ids("<|vision_end|>")
    assert (cfg.vision_config.patch_size, cfg.vision_config.spatial_merge_size) == (16, 2)
    assert cfg.vision_config.temporal_patch_size == 2
    pre = json.loads((tiny_model / "preprocessor_config.json").read_text())
    assert (pre["patch_size"], pre["merge_size"], pre["temporal_patch_size"]) == (16, 2, 2)
    # Every letter, bare and after a space, is one token (so the prior can reach it).
    for c in LETTERS:
        assert len(tok(c, add_special_tokens=False)["input_ids"]) == 1
        assert len(tok(" " + c, add_special_tokens=False)["input_ids"]) == 1


def test_letters_lead_the_top20_with_varied_margins_and_inputs_move_them(hf_engine: HFEngine) -> None:
    prompts = [QUESTION, "Options:\nA. x\nB. y\nC. z\nD. w\nAnswer with the option letter only.", "hello"]
    res = hf_engine.score_sync([ScoreRequest(f"p{i}", p) for i, p in enumerate(prompts)])
    lps = []
    for r in res:
        assert isinstance(r, LetterScores), r
        letters = [e for e in r.top if str(e["token"]).strip() in LETTERS]
        assert len(letters) >= 10
        lp, _, _ = letter_logprobs(r.top, 4)
        assert len(set(round(v, 3) for v in lp)) == 4  # distinct: margins vary
        lps.append(lp)
    assert lps[0] != lps[1] != lps[2]  # the input moves the scores


def test_seed_changes_the_letter_prior(tmp_path: Path, tiny_model: Path) -> None:
    other = HFEngine(build_tiny_model(tmp_path / "s7", seed=7), device="cpu")
    base = HFEngine(tiny_model, device="cpu")
    a = base.score_sync([ScoreRequest("a", QUESTION)])[0]
    b = other.score_sync([ScoreRequest("a", QUESTION)])[0]
    assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
    assert letter_logprobs(a.top, 26)[0] != letter_logprobs(b.top, 26)[0]
