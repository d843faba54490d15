"""Answers that end after K new tokens, as a real model's end token would end them.

A random-weight model never emits its end token, and its greedy tokens repeat, so a stop token
picked from its own output often appears too early to force a K-token answer. Here every
batch's loop is told each row finished from step K on (``FinishWatch.finished``), so the engine
reads the flag as it reads a real stop (``decode_lookback`` steps late) and each row's tokens are
cut at K; ``max_tokens`` stays as sent, so the steps are reserved, and captured as a CUDA graph,
as for a real model that stops itself. Used by ``sweep_mix --answer-stop`` and ``gpu_screen``'s
answer rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def answers_stop_after(k: int) -> Iterator[None]:
    """Inside the block, every generation batch ends after ``k`` new tokens (module docstring)."""
    from benchcheck.engines.hf.forward import generate as gen

    if not all(hasattr(gen, n) for n in ("FinishWatch", "_cut")):
        raise SystemExit("answer_stop: generate.FinishWatch/_cut are gone; update answers_stop_after()")
    real_watch, real_cut = gen.FinishWatch, gen._cut

    class StopAt(real_watch):  # type: ignore[misc, valid-type]
        def finished(self, done: torch.Tensor) -> bool:
            if self.step >= k:
                done = torch.ones_like(done)
            return bool(super().finished(done))

    def cut(tokens: list[list[int]], max_new: list[int], stop_ids: set[int]) -> list[list[int]]:
        return real_cut(tokens, [min(n, k) for n in max_new], stop_ids)

    gen.FinishWatch, gen._cut = StopAt, cut  # type: ignore[misc]
    try:
        yield
    finally:
        gen.FinishWatch, gen._cut = real_watch, real_cut  # type: ignore[misc]
