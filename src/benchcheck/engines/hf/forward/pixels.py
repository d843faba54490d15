"""Pixel values on the device: the last steps of Qwen3-VL's image processor, done in torch.

The processor rescales and normalizes each resized frame in float32, then cuts it into
16x16 patches ordered by 2x2 merge groups, each repeated over the 2-frame temporal patch. A
per-channel lookup table reproduces rescale + normalize bit for bit, and the patch order is a
reshape and permute, so doing this on the GPU gives the processor's exact values while only the
uint8 frames cross the bus (for 32 frames at 448x256: 11 MB instead of 88 MB per request).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from benchcheck.engines.hf.runtime.transfer import pinned_empty, to_device


@dataclass(frozen=True, slots=True)
class PixelSpec:
    """The processor's numbers on one device: lookup table and patch layout."""

    table: torch.Tensor  # (C, 256) float32
    patch: int
    merge: int
    temporal: int

    @classmethod
    def build(cls, table: np.ndarray, layout: tuple[int, int, int], device: torch.device) -> PixelSpec:
        return cls(torch.from_numpy(np.ascontiguousarray(table)).to(device), *layout)


def stage_frames(frames: Sequence[np.ndarray], device: torch.device) -> list[torch.Tensor]:
    """``frames`` on the host as ``patchify_staged`` copies them: each run of equal-sized frames
    (all 32 frames of a video, usually) stacked into one (N, H, W, C) uint8 buffer, page-locked
    when ``device`` is CUDA. Host work only, so it can run off the launching thread."""
    out = []
    for _, run in itertools.groupby(frames, key=lambda f: f.shape):
        group = list(run)
        h, w, c = group[0].shape
        host = pinned_empty((len(group), h, w, c), torch.uint8, device)
        np.stack(group, out=host.numpy())  # straight into page-locked memory: one host copy
        out.append(host)
    return out


def patchify_staged(stacks: Sequence[torch.Tensor], spec: PixelSpec) -> torch.Tensor:
    """(patches, C * temporal * patch * patch) float32 pixel values of the staged frames
    (``stage_frames``) in order, on the spec's device: equal to ``Qwen2VLImageProcessorPil``
    output for the same resized frames."""
    ps, m, tp = spec.patch, spec.merge, spec.temporal
    channels = torch.arange(spec.table.shape[0], device=spec.table.device)
    out = []
    for host in stacks:
        raw = to_device(host, spec.table.device, pinned=True)
        x = spec.table[channels, raw.long()]  # (N, H, W, C) float32 via lut[c, v]
        n, h, w, c = x.shape
        gh, gw = h // ps, w // ps
        x = x.permute(0, 3, 1, 2).reshape(n, c, gh // m, m, ps, gw // m, m, ps)
        x = x.permute(0, 2, 5, 3, 6, 1, 4, 7)  # (N, gh/m, gw/m, m, m, C, ps, ps)
        x = x.unsqueeze(6).expand(n, gh // m, gw // m, m, m, c, tp, ps, ps)
        out.append(x.reshape(n * gh * gw, c * tp * ps * ps))
    return torch.cat(out)


def patchify(frames: Sequence[np.ndarray], spec: PixelSpec) -> torch.Tensor:
    """``patchify_staged`` of ``stage_frames``: the frames' pixel values on the spec's device."""
    return patchify_staged(stage_frames(frames, spec.table.device), spec)
