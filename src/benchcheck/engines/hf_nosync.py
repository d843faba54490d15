"""The scoring forward of a Qwen3-VL model with no device waits inside it.

transformers' multimodal forward reads the device back several times: it checks the image
placeholder count (``.item()``-style), scatters image features by a boolean mask and adds the
DeepStack features by boolean indexing in three layers (each ``nonzero``), and, with no attention
mask, reads the positions back to detect packed sequences. Each read lets the device run dry,
and the host then had at most the rest of that forward to build and queue the next batch (the
engine runs one batch ahead). Here the placeholder positions come from the host copy of the
token types (checked against the image grids on the host), image features go in by index
(``index_copy``: the same values in the same order as the masked scatter), DeepStack features are
added by index (the same sums), and the language model gets only the three M-RoPE position rows
(the text row served nothing but that detection under SDPA). So the host can queue a whole batch
ahead of the device.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import torch

from benchcheck.engines.hf_batch import Batch
from benchcheck.engines.hf_inputs import IMAGE
from benchcheck.engines.hf_transfer import to_device
from benchcheck.engines.hf_vision import vision_inputs


def image_index(batch: Batch, merge: int) -> torch.Tensor:
    """Flat (row-major) positions of the image placeholders of ``batch``, on its device; a count
    that does not match the image grids raises ``ValueError``."""
    _, _, host_types, grid = batch.host
    flat = np.flatnonzero(host_types.numpy().reshape(-1) == IMAGE)
    expected = int((grid.prod(-1) // merge**2).sum()) if grid is not None else 0
    if len(flat) != expected:
        raise ValueError(f"{len(flat)} image placeholder tokens for {expected} image features")
    return to_device(torch.from_numpy(flat), batch.input_ids.device)


def _deepstack_process(self: Any, hidden_states: torch.Tensor, visual_pos_masks: torch.Tensor,
                       visual_embeds: torch.Tensor) -> torch.Tensor:
    """transformers' DeepStack addition; ``visual_pos_masks`` may also be flat positions (int64),
    which need no device read. A boolean mask takes transformers' own path."""
    if visual_pos_masks.dtype == torch.bool:
        return type(self)._deepstack_process(self, hidden_states, visual_pos_masks, visual_embeds)  # type: ignore[no-any-return]
    flat = hidden_states.reshape(-1, hidden_states.shape[-1])
    added = flat[visual_pos_masks] + visual_embeds.to(hidden_states.device, hidden_states.dtype)
    return flat.index_put((visual_pos_masks,), added).view_as(hidden_states)


def use_indexed_deepstack(model: Any) -> None:
    """Let ``model``'s language model take flat DeepStack positions (see ``_deepstack_process``)."""
    lm = model.model.language_model
    lm._deepstack_process = types.MethodType(_deepstack_process, lm)


def last_hidden(model: Any, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
    """The language model's last hidden states (B, L, hidden) for a right-padded ``batch`` at
    positions ``pos`` (4, B, L), computed as ``model.model`` computes them, with no device read."""
    m = model.model
    embeds = m.get_input_embeddings()(batch.input_ids)
    index = deepstack = None
    if batch.pixel_values is not None and batch.host[3] is not None:
        kw = vision_inputs(model, batch.host[3])
        grid = kw.pop("image_grid_thw")
        out = m.get_image_features(batch.pixel_values, grid, **kw)
        image = torch.cat(out.pooler_output, dim=0).to(embeds.device, embeds.dtype)
        index = image_index(batch, int(m.visual.spatial_merge_size))
        embeds = embeds.reshape(-1, embeds.shape[-1]).index_copy(0, index, image).view_as(embeds)
        deepstack = out.deepstack_features
    out = m.language_model(inputs_embeds=embeds, attention_mask=None, position_ids=pos[1:],
                           visual_pos_masks=index, deepstack_visual_embeds=deepstack, use_cache=False)
    return out.last_hidden_state  # type: ignore[no-any-return]
