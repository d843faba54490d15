"""The visual forward without its device reads (op ``visual_no_reads``, off by default; decision 105).

transformers' Qwen3-VL forward reads the device back in every forward that carries images, and
the launching thread waits there for all the work queued before it (the next batch's host work
then no longer overlaps the device):

- ``Qwen3VLModel.get_placeholder_mask`` checks that the image features fill the placeholder
  tokens: a device comparison that ``torch._check`` reads;
- ``Qwen3VLTextModel._deepstack_process`` adds the DeepStack features at the visual positions by
  boolean indexing, read and then written (a ``nonzero`` each), in each DeepStack layer.

With the op on, the placeholder mask is built without the check (the engine's encoder writes one
placeholder per merged patch of the grid it encoded, so the count holds by construction), and the
DeepStack addition is a gather by the visual positions' running count and a ``torch.where``: the
same additions of the same values, bit for bit, and nothing read. Off, transformers' own methods
run. The op is read at each call, as ``vision_block``'s is. What the check caught (a count that
does not match, which only a bug in building the batch could cause) then surfaces as
``masked_scatter``'s device-side assertion instead of a ValueError: one reason the op is off
until it is measured to be worth it.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from benchcheck.engines.hf.model.state import state_of

MODEL_CLASS = "Qwen3VLModel"
TEXT_MODEL_CLASS = "Qwen3VLTextModel"


def add_at_mask(hidden: torch.Tensor, mask: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``hidden`` with the rows of ``values`` added, in order, at the positions where ``mask``
    (``hidden``'s leading shape) is true: what ``h = hidden.clone(); h[mask] += values`` computes,
    with no device read (``values`` must have one row per true position, as there)."""
    d = hidden.shape[-1]
    flat = hidden.reshape(-1, d)
    where = mask.to(hidden.device).reshape(-1)
    values = values.to(hidden.device, hidden.dtype)
    if values.shape[0] == 0:
        return hidden.clone()
    # The k-th true position takes values[k]; positions before the first take row 0, unused.
    order = (torch.cumsum(where, 0) - 1).clamp_(min=0)
    added = flat + values.index_select(0, order)
    return torch.where(where[:, None], added, flat).view_as(hidden)


def use_visual_without_reads(model: Any) -> int:
    """Install both methods on ``model`` (each reads op ``visual_no_reads`` at its call); returns
    how many of the two models (``Qwen3VLModel``, its ``Qwen3VLTextModel``) changed."""
    state = state_of(model)
    vl, text = model.model, model.model.language_model
    if type(vl).__name__ != MODEL_CLASS or type(text).__name__ != TEXT_MODEL_CLASS:
        return 0

    def get_placeholder_mask(self: Any, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor,
                             image_features: torch.Tensor | None = None,
                             video_features: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if input_ids is None or not state.config.op("visual_no_reads"):
            return type(self).get_placeholder_mask(self, input_ids, inputs_embeds=inputs_embeds,  # type: ignore[no-any-return]
                                                   image_features=image_features, video_features=video_features)
        image = (input_ids == self.config.image_token_id).unsqueeze(-1).to(inputs_embeds.device)
        video = (input_ids == self.config.video_token_id).unsqueeze(-1).to(inputs_embeds.device)
        return image, video

    def deepstack_process(self: Any, hidden_states: torch.Tensor, visual_pos_masks: torch.Tensor,
                          visual_embeds: torch.Tensor) -> torch.Tensor:
        if not state.config.op("visual_no_reads"):
            return type(self)._deepstack_process(self, hidden_states, visual_pos_masks, visual_embeds)  # type: ignore[no-any-return]
        return add_at_mask(hidden_states, visual_pos_masks, visual_embeds)

    vl.get_placeholder_mask = types.MethodType(get_placeholder_mask, vl)
    text._deepstack_process = types.MethodType(deepstack_process, text)
    return 2
