"""Which requests share a forward: sorted by length, cut into batches bounded by a request count
and a padded token count (pure planning; ``forward.batch`` builds the tensors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
RowCost = Callable[[int, int], int]  # (a batch's longest length, its most new tokens) -> one row's tokens


def plan_batches(lengths: Sequence[int], max_batch_size: int, max_batch_tokens: int,
                 new: Sequence[int] | None = None, row: RowCost | None = None) -> list[list[int]]:
    """Indices grouped into batches: sorted by length (plus ``new``), each batch at most
    ``max_batch_size`` requests and ``max_batch_tokens`` tokens, a longer request alone. A
    batch's tokens are its rows times one row's, ``row(its longest length, its most new tokens)``
    (default: the longest length, a padded prompt). A generation batch reserves every row the
    slots of its longest prompt plus its largest ``new`` (``forward.generate``), whichever rows
    the two maxima come from.

    >>> plan_batches([5, 1, 3, 2], max_batch_size=2, max_batch_tokens=100)
    [[1, 3], [2, 0]]
    >>> plan_batches([10, 10, 10], max_batch_size=8, max_batch_tokens=20)
    [[0, 1], [2]]
    >>> plan_batches([90, 10], 8, 200, new=[0, 90], row=lambda p, n: p + n)
    [[0], [1]]
    """
    extra = new if new is not None else [0] * len(lengths)
    cost = row or (lambda longest, _most: longest)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i] + extra[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = most = 0
    for i in order:
        grown = (max(longest, lengths[i]), max(most, extra[i]))
        if cur and (len(cur) >= max_batch_size or cost(*grown) * (len(cur) + 1) > max_batch_tokens):
            batches.append(cur)
            cur, grown = [], (lengths[i], extra[i])
        cur.append(i)
        longest, most = grown
    if cur:
        batches.append(cur)
    return batches


def batch_tokens(lengths: Sequence[int], idx: Sequence[int], new: Sequence[int] | None = None,
                 row: RowCost | None = None) -> int:
    """The tokens ``plan_batches`` counts for the batch of ``idx``.

    >>> batch_tokens([90, 10], [0, 1], new=[0, 90], row=lambda p, n: p + n)
    360
    """
    extra = new if new is not None else [0] * len(lengths)
    longest, most = max(lengths[i] for i in idx), max(extra[i] for i in idx)
    return (row(longest, most) if row else longest) * len(idx)


def prefill_groups(lengths: Sequence[int], max_batch_tokens: int) -> list[list[int]]:
    """Consecutive indices in the groups a generation batch prefills apart (``forward.generate``):
    each group at most ``max_batch_tokens`` padded tokens (its longest times its count), a longer
    request alone; the order kept, so the groups' rows in turn are the batch's.

    >>> prefill_groups([300, 300, 300, 100], max_batch_tokens=600)
    [[0, 1], [2, 3]]
    >>> prefill_groups([5, 9], max_batch_tokens=8)
    [[0], [1]]
    """
    groups: list[list[int]] = []
    longest = 0
    for i, n in enumerate(lengths):
        if groups and max(longest, n) * (len(groups[-1]) + 1) <= max_batch_tokens:
            groups[-1].append(i)
            longest = max(longest, n)
        else:
            groups.append([i])
            longest = n
    return groups


def balanced(plan: Callable[[int], list[list[T]]], cap: int) -> list[list[T]]:
    """The batches ``plan(cap)`` makes (``plan``: requests at most per batch -> batches), made
    as even as the same number of batches allows: ``plan`` at the smallest cap that needs no
    more batches. A chunk of 270 requests that 256 a batch would cut
    into 256 + 14 becomes 135 + 135: a small batch ahead of a large one left the device idle
    while the host built the large one (H200 timeline, one-frame requests: ~80 ms a chunk).

    >>> balanced(lambda c: plan_batches([1] * 5, c, 100), 4)
    [[0, 1, 2], [3, 4]]
    """
    best = plan(cap)
    if len(best) < 2:
        return best
    # From 1: a unit larger than the cap (a family of many members) goes alone, so total/count
    # is no lower bound, and no bound may pass the cap itself.
    lo, hi = 1, cap
    while lo < hi:  # greedy planning needs no fewer batches for a smaller cap: bisect
        mid = (lo + hi) // 2
        if len(plan(mid)) <= len(best):
            hi = mid
        else:
            lo = mid + 1
    return plan(lo)


def encoding_blocks(with_images: Sequence[bool], text_block: int) -> list[list[int]]:
    """Consecutive request indices in the blocks their encoding runs in: runs of text-only
    requests up to ``text_block`` together (one tokenizer call), a request with images alone
    (its decoding dominates, and its batch should not wait for the others').

    >>> encoding_blocks([False, False, False, True, False], text_block=2)
    [[0, 1], [2], [3], [4]]
    """
    blocks: list[list[int]] = []
    for i, images in enumerate(with_images):
        if images or not blocks or len(blocks[-1]) >= text_block or with_images[blocks[-1][0]]:
            blocks.append([i])
        else:
            blocks[-1].append(i)
    return blocks


def chunk_spans(n: int, first: int, growth: int, window: Callable[[int], int]) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` spans covering ``n`` requests in arrival order: the first ``first`` long, each
    next ``growth`` times the one before, at most ``window(lo)`` (the sort window where it
    starts). A remainder shorter than half a span joins that span instead of following it (the
    last span can so reach 1.5 times its planned size).

    >>> list(chunk_spans(100, 8, 2, lambda lo: 32))
    [(0, 8), (8, 24), (24, 56), (56, 100)]
    """
    lo, size = 0, max(1, first)
    while lo < n:
        hi = lo + size
        if n - hi < size // 2:
            hi = n
        yield lo, hi
        lo = hi
        size = max(1, min(growth * size, window(lo)))
