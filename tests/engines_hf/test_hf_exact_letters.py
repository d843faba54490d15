"""``lp_exact``: every letter variant's full-softmax log-prob, merged as the protocol merges them."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from benchcheck.engines.base import LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import collate
from benchcheck.engines.hf.forward.batch import position_ids as _position_ids
from benchcheck.protocol import LETTERS, LP_FLOOR, build_prompt, letter_logprobs, token_letter


def full_softmax_letters(engine: HFEngine, prompt: str, k: int) -> tuple[list[float], set[int]]:
    """Reference: one forward, the whole log-softmax row, log-sum-exp over every vocabulary token
    whose text is a letter variant; and the top-20 ids."""
    enc = engine.encoder.encode(prompt, (), "Answer:", None)
    batch = collate([enc], engine.pad_id, engine.pixels, engine.dtype)
    with torch.inference_mode():
        out = engine.model(**batch.model_kwargs(), position_ids=_position_ids(batch), use_cache=False)
    row = torch.log_softmax(out.logits[0, -1].float(), -1)
    vocab = min(len(engine.tokenizer), row.shape[0])
    per: dict[str, list[float]] = {}
    for i in range(vocab):
        letter = token_letter(engine.tokenizer.decode([i]))
        if letter is not None:
            per.setdefault(letter, []).append(float(row[i]))
    lp = [float(torch.logsumexp(torch.tensor(per[LETTERS[j]]), 0)) if LETTERS[j] in per else LP_FLOOR
          for j in range(k)]
    return lp, set(torch.topk(row, 20).indices.tolist())


def test_lp_exact_is_the_full_softmax_and_matches_lp_in_the_top20(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu", dtype="float32")
    assert engine.letters.ids and all(token_letter(t) for t in engine.letters.texts)
    prompts = [build_prompt("Select the best answer.", f"question {n}?", [f"opt {j}" for j in range(k)])
               for n, k in enumerate([2, 4, 5, 4, 6, 3])]
    ks = [2, 4, 5, 4, 6, 3]
    res = engine.score_sync([ScoreRequest(f"r{i}", p) for i, p in enumerate(prompts)])
    equal_checked = floored = 0
    for r, p, k in zip(res, prompts, ks, strict=True):
        assert isinstance(r, LetterScores) and r.exact_source == "full_softmax"
        lp_exact = letter_logprobs(r.exact, k)[0]
        want, top_ids = full_softmax_letters(engine, p, k)
        for a, b in zip(lp_exact, want, strict=True):
            assert abs(a - b) < 1e-4
        lp, missing, _ = letter_logprobs(r.top, k)
        floored += len(missing)
        in_top = [e for e in r.exact if int(e["token_id"]) in top_ids]
        for j in range(k):
            variants = [e for e in r.exact if token_letter(str(e["token"])) == LETTERS[j]]
            if {int(e["token_id"]) for e in variants} <= top_ids:  # the whole letter is in the top 20
                assert abs(lp[j] - lp_exact[j]) < 1e-5
                equal_checked += 1
            else:  # more variants than the top 20 shows, or the floor replaced: never less
                assert lp_exact[j] >= lp[j] - 1e-6
        # The exact entries restricted to the top-20 ids merge to lp exactly.
        restricted = letter_logprobs(in_top, k)[0]
        for j in range(k):
            if LETTERS[j] not in missing:
                assert abs(restricted[j] - lp[j]) < 1e-5
        # With the whole vocabulary as the top list, lp is lp_exact for every letter.
        (whole,) = engine.score_sync([ScoreRequest("w", p, top_logprobs=len(engine.tokenizer))])
        assert isinstance(whole, LetterScores)
        for a, b in zip(letter_logprobs(whole.top, k)[0], lp_exact, strict=True):
            assert abs(a - b) < 1e-5
    assert floored > 0  # the floor happened on the tiny model, and lp_exact replaced it
    # Exact probabilities are probabilities: no letter above 1, all finite.
    assert all(math.isfinite(v) and v <= 0 for r in res if isinstance(r, LetterScores) for v in
               (float(e["logprob"]) for e in r.exact))


def test_logprob_token_ids_are_gathered_as_asked(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu", dtype="float32")
    ids = (3, 17, 40)
    (r,) = engine.score_sync([ScoreRequest("x", "hello", logprob_token_ids=ids)])
    assert isinstance(r, LetterScores)
    assert [e["token_id"] for e in r.exact] == list(ids)
