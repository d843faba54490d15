"""M-RoPE positions computed while encoding equal transformers' ``get_rope_index`` per batch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import Batch, collate, position_ids
from benchcheck.engines.hf.inputs.decode import BadInput
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.inputs.rope import mrope_positions


def transformers_positions(model: Any, batch: Batch) -> torch.Tensor:
    """The batch's (4, B, L) positions the way the engine computed them before: transformers'
    ``get_rope_index`` over the padded host tensors (padding masked out)."""
    ids, mask, types, grid = batch.host
    if batch.right:
        text = torch.arange(mask.shape[1], dtype=mask.dtype).expand(mask.shape[0], -1)
    else:
        text = (mask.cumsum(-1) - 1).clamp(min=0) * mask
    if grid is None:
        mrope = text.unsqueeze(0).expand(3, -1, -1)
    else:
        mrope, _ = model.model.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=grid, attention_mask=mask)
    return torch.cat([text.unsqueeze(0), mrope.to(text.dtype)], dim=0)


@pytest.mark.parametrize("right", [False, True])
def test_positions_equal_transformers_get_rope_index(hf_engine: HFEngine, right: bool) -> None:
    enc = hf_engine.encoder
    prompts = [
        enc.encode("text only, no image at all", (), "Answer:"),
        enc.encode("one wide frame", (make_jpeg(1, w=448, h=256),), "Answer:"),
        # Tall and square frames: the running position moves on by the longer side.
        enc.encode("three of every shape " * 5, (make_jpeg(2, w=128, h=320), make_jpeg(3, w=96, h=96),
                                                make_jpeg(4, w=640, h=64)), None),
        enc.encode("a video", tuple(make_jpeg(10 + k) for k in range(32)), "Answer:"),
    ]
    batch = collate(prompts, hf_engine.pad_id, hf_engine.pixels, torch.float32, right=right)
    assert torch.equal(position_ids(batch), transformers_positions(hf_engine.model, batch))
    # A batch with no images at all: M-RoPE rows are the text row.
    text = collate(prompts[:1] * 2 + [enc.encode("longer " * 9, (), "Answer:")], hf_engine.pad_id,
                   hf_engine.pixels, torch.float32, right=right)
    assert text.host[3] is None
    assert torch.equal(position_ids(text), transformers_positions(hf_engine.model, text))


def test_a_prefix_keeps_the_prompts_own_positions(hf_engine: HFEngine) -> None:
    p = hf_engine.encoder.encode("q " * 12, (make_jpeg(5), make_jpeg(6)), "Answer:")
    assert p.mrope is not None and p.image_grid_thw is not None
    n = int(np.flatnonzero(p.mm_token_type_ids)[-1]) + 3  # past the last image
    ids = torch.from_numpy(p.input_ids[:n])[None]
    types = torch.from_numpy(p.mm_token_type_ids[:n])[None]
    ref, _ = hf_engine.model.model.get_rope_index(ids, mm_token_type_ids=types,
                                                  image_grid_thw=torch.from_numpy(p.image_grid_thw),
                                                  attention_mask=torch.ones_like(ids))
    assert np.array_equal(p.mrope[:, :n], ref[:, 0].numpy())


def test_runs_that_do_not_fit_their_grids_are_refused() -> None:
    types = np.array([0, 1, 1, 1, 1, 0])
    grid = np.array([[1, 4, 4]])  # 4 tokens once merged 2x2
    assert mrope_positions(types, grid, 2).tolist() == [[0, 1, 1, 1, 1, 3], [0, 1, 1, 2, 2, 3], [0, 1, 2, 1, 2, 3]]
    with pytest.raises(ValueError, match="image 0: 4 placeholder tokens for a 1x2x3 token grid"):
        mrope_positions(types, np.array([[1, 4, 6]]), 2)
    with pytest.raises(ValueError, match="1 image placeholder run"):
        mrope_positions(types, None, 2)
    assert mrope_positions(np.zeros(0, np.int64), None, 2).shape == (3, 0)


def test_an_encoded_prompt_with_misplaced_placeholders_is_a_bad_input(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    ids = np.asarray(enc._tokenize([enc.render("x", 2, None)])[0], np.int64)
    where = np.flatnonzero(ids == enc.image_token_id)
    # Two images' placeholders made adjacent: their runs merge into one, which fits no grid.
    glued = np.concatenate([ids[: where[0] + 1], ids[where[1] : where[1] + 1], ids[where[1] + 1 :]])
    with pytest.raises(BadInput, match="image placeholder run"):
        enc._with_images(glued, (make_jpeg(7), make_jpeg(8)))


def test_an_encoded_prompt_keeps_positions_for_its_own_tokens() -> None:
    ids = np.arange(6)
    types = np.array([0, 1, 1, 1, 1, 0])
    grid = np.array([[1, 4, 4]])
    EncodedPrompt(ids, types, (), grid, mrope_positions(types, grid, 2))  # consistent: fine
    with pytest.raises(ValueError, match="exactly when it has images"):
        EncodedPrompt(ids, types, (), grid, None)
    with pytest.raises(ValueError, match=r"shape \(3, 5\) for a prompt of 6 tokens"):
        EncodedPrompt(ids, types, (), grid, mrope_positions(types[:5], grid, 2))
    with pytest.raises(ValueError, match="video placeholder tokens"):
        mrope_positions(np.array([0, 2, 2, 2, 2, 0]), grid, 2)


def test_a_checkpoint_whose_processor_merges_otherwise_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_model, folder)
    cfg_path = folder / "preprocessor_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["merge_size"] = 4
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"merges 4x4 patches, the model's vision config 2x2"):
        HFEngine(folder, device="cpu")
