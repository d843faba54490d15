"""Request -> model inputs for the ``hf`` engine, the way a vLLM server builds them.

vLLM renders the chat messages with the model's own chat template, tokenizes the text without
adding special tokens, and expands every ``<|image_pad|>`` into as many copies as the image has
merged patches (``grid_t * grid_h * grid_w / merge**2``). Pixel values come from the model's
image processor. This module does the same with the tokenizer and transformers' PIL image
processor (no torchvision, which does not load everywhere this runs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchcheck.engines.base import ImageRef
from benchcheck.engines.hf.inputs.decode import BadInput, FrameDecoder, ResizeRule
from benchcheck.engines.hf.inputs.frame_memo import FrameMemo, images_key
from benchcheck.engines.hf.inputs.rope import mrope_positions

# preprocessor_config.json keys the PIL image processor takes.
_PROCESSOR_KEYS = (
    "size", "patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std",
    "do_resize", "do_rescale", "rescale_factor", "do_normalize", "do_convert_rgb", "resample",
    "min_pixels", "max_pixels",
)  # fmt: skip

TEXT, IMAGE = 0, 1  # mm_token_type_ids values (0 text, 1 image, 2 video)


@dataclass(frozen=True, slots=True)
class EncodedPrompt:
    """One request's model inputs before batching (NumPy, so encoding needs no torch); the
    images as resized uint8 frames, turned into pixel values on the device."""

    input_ids: np.ndarray  # (L,) int64, image placeholders expanded
    mm_token_type_ids: np.ndarray  # (L,) int64: 0 text, 1 image
    frames: tuple[np.ndarray, ...]  # resized images, (H, W, 3) uint8 each
    image_grid_thw: np.ndarray | None  # (n_images, 3) int64
    # (3, L) int64 M-RoPE positions (``inputs.rope``), computed while encoding; None only for a
    # prompt without images (every axis is then the token's index).
    mrope: np.ndarray | None
    # Which images the request named (``images_key``; b"" without images): prompts with equal
    # keys usually hold equal frames, which the prefix planner brings together (``schedule.families``).
    # It only orders: sharing a prefix that holds images still needs the frames to be equal.
    frames_key: bytes = b""

    def __post_init__(self) -> None:
        # Positions belong to these tokens: a prompt with images carries them, one per token (a
        # copy made with other tokens must recompute them: ``inputs.rope.mrope_positions``).
        if (self.mrope is None) != (self.image_grid_thw is None):
            raise ValueError("a prompt carries M-RoPE positions exactly when it has images")
        if self.mrope is not None and self.mrope.shape != (3, self.n_tokens):
            raise ValueError(f"M-RoPE positions of shape {self.mrope.shape} for a prompt of {self.n_tokens} tokens")

    @property
    def n_tokens(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass(frozen=True, slots=True)
class PromptParts:
    """What ``PromptEncoder.encode_many`` needs of one request."""

    prompt: str
    images: Sequence[ImageRef] = ()
    assistant_prefix: str | None = None
    system: str | None = None


class PromptEncoder:
    """Renders and tokenizes requests and preprocesses their images for one model folder."""

    def __init__(self, tokenizer: Any, preprocessor_config: dict[str, Any], image_token_id: int) -> None:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        self.tokenizer = tokenizer
        self.image_token_id = image_token_id
        kwargs = {k: v for k, v in preprocessor_config.items() if k in _PROCESSOR_KEYS}
        self.image_processor = Qwen2VLImageProcessorPil(**kwargs)
        self.merge = int(self.image_processor.merge_size)
        ip = self.image_processor
        rule = (ResizeRule(int(ip.patch_size) * self.merge, int(ip.size["shortest_edge"]), int(ip.size["longest_edge"]),
                           int(ip.resample)) if ip.do_resize else ResizeRule(None))
        # Decodes each request's images: in this thread, or in worker processes once the engine
        # sets ``decoder.processes`` (on CUDA, where the launching thread needs Python's lock).
        self.decoder = FrameDecoder(rule)
        # One video's questions decode its frames once (``inputs.frame_memo``).
        self.memo = FrameMemo()
        self._table: np.ndarray | None = None
        self._layouts: dict[tuple[int, str | None, str | None], tuple[str, str] | tuple[()]] = {}

    @classmethod
    def from_folder(cls, folder: Path, tokenizer: Any, image_token_id: int) -> PromptEncoder:
        cfg = json.loads((Path(folder) / "preprocessor_config.json").read_text())
        return cls(tokenizer, cfg, image_token_id)

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of rendered texts, special tokens matched, none added (as vLLM tokenizes).

        Through the Rust tokenizer's batch call even for one text: it leaves Python's lock while
        it works, where its single-text call keeps it. On an H200 host, encoding threads calling
        the single-text one made every Python-to-C step of the thread launching the device work
        wait for the lock (up to 5 ms each, the interpreter's switch interval): the first forward
        of a 4,096-request 8B blind call, 16 requests, took 1.56 s of device time, and the call
        400 forwards/s instead of 500 (decision 013).
        """
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:
            return [list(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
        if backend.padding is not None:  # the batch call would pad every text to the longest
            return [backend.encode(t, add_special_tokens=False).ids for t in texts]
        return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]

    def render(self, prompt: str, n_images: int, assistant_prefix: str | None, system: str | None = None) -> str:
        """The chat text: [system], user = images then ``prompt``, then either the prefilled
        assistant turn continued (no generation prompt) or a generation prompt.

        The template is rendered once per message layout with a marker for the prompt; later
        prompts are spliced in where the marker was (a Jinja render costs the encoding threads
        most of their time, under Python's lock that the thread driving the device needs too).
        A layout is spliced only when the splice reproduced a real render exactly, and a prompt only
        when the template could treat it differently (tags, surrounding white space) is not.
        """
        key = (n_images, assistant_prefix, system)
        if "<" not in prompt and prompt == prompt.strip():
            parts = self._layouts.get(key)
            if parts is None:
                parts = self._layout(key, prompt)
            if parts:
                return parts[0] + prompt + parts[1]
        return self._render(prompt, n_images, assistant_prefix, system)

    def _layout(self, key: tuple[int, str | None, str | None], prompt: str) -> tuple[str, str] | tuple[()]:
        """Text before and after the prompt for one message layout, or () when splicing would not
        reproduce the template's own rendering of ``prompt``."""
        marker = "BENCHCHECKPROMPTMARKER"
        text = self._render(marker, *key)
        parts: tuple[str, str] | tuple[()] = ()
        if text.count(marker) == 1:
            head, tail = text.split(marker)
            if head + prompt + tail == self._render(prompt, *key):
                parts = (head, tail)
        self._layouts[key] = parts
        return parts

    def _render(self, prompt: str, n_images: int, assistant_prefix: str | None, system: str | None) -> str:
        content: list[dict[str, str]] = [{"type": "image"} for _ in range(n_images)]
        content.append({"type": "text", "text": prompt})
        messages: list[dict[str, Any]] = []
        if system is not None:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": content})
        if assistant_prefix is not None:
            messages.append({"role": "assistant", "content": assistant_prefix})
        text: str = self.tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=assistant_prefix is None,
            continue_final_message=assistant_prefix is not None,
        )
        return text

    def frames(self, images: Sequence[ImageRef],
               named: bytes | None = None) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Each image decoded and resized as the model's image processor resizes it (``smart_resize``
        to multiples of 32 px, PIL, the processor's resampling), as (H, W, 3) uint8, read-only
        (the same arrays for the requests that name the same images: ``inputs.frame_memo``); with the
        (t, h, w) patch grids. ``named``: ``images_key(images)``, where the caller has it.

        Rescale, normalize and patchify happen later, on the device (``forward.pixels``): the frames
        travel as bytes, 8 times smaller than the processor's float32 patches.
        """
        ps = int(self.image_processor.patch_size)
        out = tuple(self.memo.frames(images, self.decoder.frames, named))
        grids = [[1, f.shape[0] // ps, f.shape[1] // ps] for f in out]
        return out, np.asarray(grids, np.int64).reshape(-1, 3)

    @property
    def patch_layout(self) -> tuple[int, int, int]:
        """(patch size, spatial merge, temporal patch) of the image processor."""
        ip = self.image_processor
        return int(ip.patch_size), int(ip.merge_size), int(ip.temporal_patch_size)

    @property
    def pixel_table(self) -> np.ndarray:
        """(C, 256) float32: pixel value v of channel c -> the processor's rescaled (float64, then
        float32) and normalized value. A lookup gives the processor's float32 values bit for bit."""
        if self._table is None:
            ip = self.image_processor
            v = np.arange(256, dtype=np.float64)
            v = (v * ip.rescale_factor if ip.do_rescale else v).astype(np.float32)
            mean = np.asarray(ip.image_mean, np.float32)[:, None]
            std = np.asarray(ip.image_std, np.float32)[:, None]
            self._table = ((v[None, :] - mean) / std if ip.do_normalize else np.tile(v, (3, 1))).astype(np.float32)
        return self._table

    def tokens_per_image(self, grid_thw: np.ndarray) -> np.ndarray:
        """LLM tokens of each image: its patches over the spatial merge (448x256 -> 112)."""
        return np.asarray(grid_thw.prod(axis=-1) // (self.merge * self.merge), np.int64)

    def encode(
        self,
        prompt: str,
        images: Sequence[ImageRef] = (),
        assistant_prefix: str | None = None,
        system: str | None = None,
    ) -> EncodedPrompt:
        """Model inputs of one request (``BadInput`` when it can never be answered)."""
        text = self.render(prompt, len(images), assistant_prefix, system)
        return self._with_images(np.asarray(self._tokenize([text])[0], np.int64), images)

    def encode_many(self, requests: Sequence[PromptParts]) -> list[EncodedPrompt | BadInput]:
        """``encode`` of each request, their texts tokenized in one call (fewer, longer stretches
        outside Python's lock); a request that can never be answered gets its ``BadInput``."""
        texts = [self.render(r.prompt, len(r.images), r.assistant_prefix, r.system) for r in requests]
        out: list[EncodedPrompt | BadInput] = []
        for r, ids in zip(requests, self._tokenize(texts), strict=True):
            try:
                out.append(self._with_images(np.asarray(ids, np.int64), r.images))
            except BadInput as e:
                out.append(e)
        return out

    def _with_images(self, ids: np.ndarray, images: Sequence[ImageRef]) -> EncodedPrompt:
        """A tokenized request with its images decoded and their placeholders expanded."""
        where = np.flatnonzero(ids == self.image_token_id)
        if len(where) != len(images):
            raise BadInput(f"the prompt holds {len(where) - len(images)} image placeholder token(s) of its own")
        if not images:
            return EncodedPrompt(ids, np.zeros_like(ids), (), None, None)
        named = images_key(images)
        frames, grid = self.frames(images, named)
        repeats = np.ones_like(ids)
        repeats[where] = self.tokens_per_image(grid)
        expanded = np.repeat(ids, repeats)
        types = np.where(expanded == self.image_token_id, IMAGE, TEXT).astype(np.int64)
        try:
            mrope = mrope_positions(types, grid, self.merge)
        except ValueError as e:  # placeholders the template did not lay out as images
            raise BadInput(str(e)) from None
        return EncodedPrompt(expanded, types, frames, grid, mrope, named)
