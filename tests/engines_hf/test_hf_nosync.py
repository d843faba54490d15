"""The scoring forward without device reads computes exactly what transformers' forward does."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.hf import HFEngine
from benchcheck.engines.hf_batch import collate, position_ids
from benchcheck.engines.hf_nosync import image_index, last_hidden


def test_indexed_forward_equals_the_models_own(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    ps = [enc.encode("short?", (make_jpeg(1), make_jpeg(2)), "Answer:"),
          enc.encode("a longer question " * 5, (make_jpeg(3),), "Answer:"),
          enc.encode("no image at all here", (), "Answer:")]
    batch = collate(ps, hf_engine.pad_id, hf_engine.pixels, torch.float32, right=True)
    pos = position_ids(batch)
    with torch.inference_mode():
        ours = last_hidden(hf_engine.model, batch, pos)
        # transformers' multimodal forward: boolean masks, masked scatter, 4 position rows.
        ref = hf_engine.model.model(**batch.model_kwargs(), position_ids=pos, use_cache=False).last_hidden_state
    assert hf_engine.model.config.vision_config.deepstack_visual_indexes  # DeepStack runs in the tiny model
    for r, p in enumerate(ps):  # every real token, padding aside
        assert torch.equal(ours[r, : p.n_tokens], ref[r, : p.n_tokens])


def test_placeholder_count_is_checked_on_the_host(hf_engine: HFEngine) -> None:
    p = hf_engine.encoder.encode("look", (make_jpeg(4),), "Answer:")
    batch = collate([p], hf_engine.pad_id, hf_engine.pixels, torch.float32, right=True)
    merge = int(hf_engine.model.model.visual.spatial_merge_size)
    assert len(image_index(batch, merge)) == int(p.image_grid_thw.prod(-1).sum()) // merge**2  # type: ignore[union-attr]
    ids, mask, types, grid = batch.host
    broken = types.clone()
    broken[0, int(torch.nonzero(broken[0])[0])] = 0  # one placeholder fewer than the grid says
    bad = dataclasses.replace(batch, host=(ids, mask, broken, grid))
    with pytest.raises(ValueError, match="image placeholder tokens for"):
        image_index(bad, merge)
