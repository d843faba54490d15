"""Scoring right-padded without a mask computes what left padding with a mask computes.

Under causal attention a real token never sees the padding that follows it, so the scoring
forward runs with no mask at all (SDPA's causal kernel on CUDA); each row is scored at its own
last real token. float32 on the CPU: the letters' log-probs agree to float32 rounding.
"""

from __future__ import annotations

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import collate, position_ids
from benchcheck.engines.hf.forward.score import score_batch
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt


def prompts(engine: HFEngine, images: bool) -> list[EncodedPrompt]:
    enc = engine.encoder
    texts = ["short?", "a much longer question about the clip " * 6, "medium length question here?"]
    return [enc.encode(t, (make_jpeg(10 + i), make_jpeg(20 + i)) if images else (), "Answer:")
            for i, t in enumerate(texts)]


def alone(engine: HFEngine, p: EncodedPrompt, ids: torch.Tensor) -> torch.Tensor:
    b = collate([p], engine.pad_id, engine.pixels, torch.float32)
    with torch.inference_mode():
        logits = engine.model(**b.model_kwargs(), position_ids=position_ids(b)).logits
    return torch.log_softmax(logits[0, -1].float(), -1)[ids]


@pytest.mark.parametrize("images", [False, True])
def test_right_padded_scores_equal_each_request_alone(hf_engine: HFEngine, images: bool) -> None:
    ps = prompts(hf_engine, images)
    assert len({p.n_tokens for p in ps}) == len(ps)  # real padding in the batch
    ids = torch.tensor(sorted(set(hf_engine.letters.ids))[:40])
    batch = collate(ps, hf_engine.pad_id, hf_engine.pixels, torch.float32, right=True)
    assert batch.model_kwargs()["attention_mask"] is None
    # Padding sits after each row's tokens, and the text positions run on without a reset.
    assert int(batch.attention_mask[0, : ps[0].n_tokens].sum()) == ps[0].n_tokens
    assert torch.equal(position_ids(batch)[0, 0], torch.arange(batch.input_ids.shape[1]))
    pending = score_batch(hf_engine.model, batch, 20, ids)
    values, _ = pending.wait()
    assert pending.gathered is not None
    for r, p in enumerate(ps):
        ref = alone(hf_engine, p, ids)
        assert torch.allclose(pending.gathered[r], ref, atol=1e-4), (pending.gathered[r] - ref).abs().max()
        left = collate(ps, hf_engine.pad_id, hf_engine.pixels, torch.float32)
        lv, _ = score_batch(hf_engine.model, left, 20).wait()
        assert torch.allclose(values[r], lv[r], atol=1e-4)


def test_right_padding_leaves_no_trace_in_real_rows(hf_engine: HFEngine) -> None:
    # A short request scores the same next to a long one as next to one of its own length.
    ps = prompts(hf_engine, False)
    ids = torch.tensor(sorted(set(hf_engine.letters.ids))[:40])
    with_long = score_batch(hf_engine.model, collate([ps[0], ps[1]], hf_engine.pad_id, hf_engine.pixels,
                                                     torch.float32, right=True), 20, ids)
    with_self = score_batch(hf_engine.model, collate([ps[0], ps[0]], hf_engine.pad_id, hf_engine.pixels,
                                                     torch.float32, right=True), 20, ids)
    with_long.wait()
    with_self.wait()
    assert with_long.gathered is not None and with_self.gathered is not None
    assert torch.allclose(with_long.gathered[0], with_self.gathered[0], atol=1e-5)


def test_right_padded_width_is_rounded_and_rows_stay_exact(hf_engine: HFEngine) -> None:
    from benchcheck.engines.hf.forward.batch import padded_width

    ps = prompts(hf_engine, False)
    batch = collate(ps, hf_engine.pad_id, hf_engine.pixels, torch.float32, right=True)
    longest = max(p.n_tokens for p in ps)
    assert batch.input_ids.shape[1] == padded_width(longest) >= longest
    assert padded_width(longest) % 16 == 0 and padded_width(longest) - longest < 16
    assert [int(m.sum()) for m in batch.attention_mask] == [p.n_tokens for p in ps]
