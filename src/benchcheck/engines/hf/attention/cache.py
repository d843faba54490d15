"""The KV cache of greedy generation: every layer's keys and values in buffers reserved once.

transformers' ``DynamicCache`` concatenates each step's keys and values onto the cache, copying
all of it (at 54,000 tokens 8 GB for one 8B row, read and written again per step).
``ReservedCache`` reserves the prompt's and every new token's slots once and writes each step
into its slot (``forward.generate`` runs the steps).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


class ReservedLayer(CacheLayerMixin):  # type: ignore[no-untyped-call]
    """One decoder layer's keys and values in buffers reserved for ``capacity`` tokens.

    A prefill (or any update while ``slot`` is None) appends and returns the filled part, as
    transformers' ``DynamicLayer`` would, without copying what is already there. A decode step
    (``slot`` set: a one-element device tensor) writes its token at that slot and returns the
    whole reservation, which the step attends over with a mask of the slots written so far."""

    is_sliding = False
    is_compileable = False

    def __init__(self, capacity: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.capacity = capacity
        self.length = 0
        self.slot: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, d = key_states.shape
        self.keys = key_states.new_zeros((b, h, self.capacity, d))
        self.values = value_states.new_zeros((b, h, self.capacity, value_states.shape[-1]))
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self.keys is not None and self.values is not None
        if self.slot is not None:
            self.keys.index_copy_(2, self.slot, key_states)
            self.values.index_copy_(2, self.slot, value_states)
            return self.keys, self.values
        start, end = self.length, self.length + key_states.shape[-2]
        if end > self.capacity:
            raise ValueError(f"a reserved KV cache of {self.capacity} tokens cannot take {end}")
        self.keys[:, :, start:end] = key_states
        self.values[:, :, start:end] = value_states
        self.length = end
        if start == 0:
            # The prefill attends over exactly what it just computed: the tensors themselves, in the
            # layout the attention kernels already take for the queries (a view of the reservation
            # has a head stride of the whole capacity, which a kernel might refuse, falling back to
            # the math kernel: at 54,000 tokens it would not fit in memory).
            return key_states, value_states
        return self.keys[:, :, :end], self.values[:, :, :end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.capacity


class ReservedCache(Cache):
    """A KV cache of reserved layers (``ReservedLayer``). Once ``decoding``, every forward through
    it is a decode step: one token a row, attending over the whole reservation with the (B, 1, 1,
    capacity) bool mask the step passes as its attention mask (True: written and not padding)."""

    def __init__(self, layers: int, capacity: int) -> None:
        super().__init__(layers=[ReservedLayer(capacity) for _ in range(layers)])
        self.decoding = False

    def reserve(self, rows: int, kv: tuple[int, int], dtype: torch.dtype, device: torch.device) -> None:
        """Every layer's buffers for ``rows`` rows of ``kv`` = (K/V heads, head size), allocated
        now: row ranges of them are then prefilled apart (``rows``)."""
        for layer in self.layers:
            assert isinstance(layer, ReservedLayer)
            layer.keys = torch.zeros((rows, kv[0], layer.capacity, kv[1]), dtype=dtype, device=device)
            layer.values = torch.zeros_like(layer.keys)
            layer.is_initialized = True

    def rows(self, lo: int, hi: int) -> ReservedCache:
        """A cache over rows ``[lo, hi)`` of this one's reserved buffers (views: a prefill through it
        writes here), empty."""
        part = ReservedCache(len(self.layers), 0)
        for mine, theirs in zip(part.layers, self.layers, strict=True):
            assert isinstance(mine, ReservedLayer) and isinstance(theirs, ReservedLayer)
            assert theirs.keys is not None and theirs.values is not None, "reserve() first"
            mine.capacity = theirs.capacity
            mine.keys, mine.values = theirs.keys[lo:hi], theirs.values[lo:hi]
            mine.is_initialized = True
        return part

    def filled(self, length: int) -> None:
        """Rows prefilled apart (``rows``), each padded on the right to ``length`` tokens."""
        for layer in self.layers:
            assert isinstance(layer, ReservedLayer)
            layer.length = length

    def start_decoding(self, slot: torch.Tensor) -> None:
        """From now on every update writes one token at ``slot`` (see ``ReservedLayer``)."""
        for layer in self.layers:
            assert isinstance(layer, ReservedLayer)
            layer.slot = slot
        self.decoding = True


# Keys per block of a decode step's value reduction (``decode_attention``). A reservation for
# fixed-shape steps is a multiple of it (at most this many unused slots a row).
KEY_BLOCK = 128


def reserved_slots(tokens: int) -> int:
    """The KV slots reserved for ``tokens`` (prompt + new tokens - 1) at fixed-shape steps: whole
    key blocks. The batch planner counts a generation request so too."""
    return -(-tokens // KEY_BLOCK) * KEY_BLOCK
