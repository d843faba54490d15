"""Exact prefix sharing for the ``hf`` engine's scoring forwards.

Step 1 asks each question under 4 option permutations: the 4 prompts share every token up to
the first option that differs (chat template, intro, question), often more than half of each
prompt. Requests whose token ids start the same are grouped into *families*; a family runs as one
packed row: the common prefix once, then each member's remaining tokens (its *suffix*) as a
continuation of it. A tree-shaped attention mask lets every suffix token see the prefix and the
earlier tokens of its own suffix, and nothing of the other suffixes; each token keeps the
position it has in its own full prompt. So every member's last position sees exactly the keys,
values and positions of its unshared forward: the same function, computed with fewer tokens
(only the reduction order of the attention can differ). Images are shared too when they all lie
inside the prefix (the vision tower then runs once per family): the questions asked of one
video's frames share the template, the frames and the intro.

Unlike vLLM's automatic prefix caching (whole 16-token blocks), the split is token-exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchcheck.engines.hf.forward.packed import Family
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt

MIN_SHARED = 8  # tokens; a shorter common prefix saves less than the mask and bookkeeping cost
MAX_FAMILY = 16  # members per packed row
# Questions about the same frames (a real pool asks several per video) are brought together to
# share the template, the frames and the intro; False: only as token ids happen to sort them
# (``gpu_screen.py --variants frames-apart``).
SHARE_FRAMES = True


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common start of two token arrays."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def plan_families(prompts: Sequence[EncodedPrompt], min_shared: int = MIN_SHARED,
                  max_family: int = MAX_FAMILY) -> list[Family]:
    """Group ``prompts`` into families (every prompt in exactly one; ordered by first member).

    Prompts are sorted by the images they name (``EncodedPrompt.frames_key``), then by their
    token ids, so prompts sharing a prefix are neighbours (questions about the same frames too:
    in token ids every image's placeholders are alike, and the question after them would decide),
    and the common prefix of a run of neighbours is the smallest common prefix of adjacent ones. The runs
    are chosen to save the most tokens (a family of c members sharing n tokens saves (c-1)*n): a
    chat template common to all items does not swallow the families that share whole questions.
    A family shares at least ``min_shared`` tokens, holds every image whole inside its prefix (the
    images being equal), and stops one token short of its shortest member, so that every member
    keeps its scored last position (identical prompts share all but their last token). A lone
    prompt is a family of one.
    """
    order = sorted(range(len(prompts)), key=lambda i: (prompts[i].frames_key if SHARE_FRAMES else b"",
                                                       prompts[i].input_ids.tolist()))
    ps = [prompts[i] for i in order]
    # lcp[j]: common prefix of sorted neighbours j-1 and j (0 when their images differ).
    lcp = [0] + [common_prefix(ps[j - 1].input_ids, ps[j].input_ids) if _same_frames(ps[j - 1], ps[j]) else 0
                 for j in range(1, len(ps))]
    # The last image token of each prompt (-1: none): a shared prefix must reach past it.
    last_image = [int(np.flatnonzero(p.mm_token_type_ids != 0)[-1]) if p.frames else -1 for p in ps]
    best = [0] * (len(ps) + 1)  # best[i]: most tokens saved over the first i sorted prompts
    cut: list[tuple[int, int]] = [(0, 0)] * (len(ps) + 1)  # (family start, its prefix) at best[i]
    for end in range(1, len(ps) + 1):
        best[end], cut[end] = best[end - 1], (end - 1, ps[end - 1].n_tokens - 1)  # alone (``lone_families``)
        n = ps[end - 1].n_tokens - 1
        image_end = last_image[end - 1]
        for start in range(end - 2, max(-1, end - 1 - max_family), -1):
            n = min(n, lcp[start + 1], ps[start].n_tokens - 1)
            image_end = max(image_end, last_image[start])
            if n < min_shared or image_end >= n:
                break  # n only shrinks as the run grows: no longer run can qualify
            gain = best[start] + (end - start - 1) * n
            if gain > best[end]:
                best[end], cut[end] = gain, (start, n)
    families: list[Family] = []
    end = len(ps)
    while end > 0:
        start, n = cut[end]
        families.append(Family(tuple(order[start:end]), n))
        end = start
    families.sort(key=lambda f: min(f.members))
    return families


def _same_frames(a: EncodedPrompt, b: EncodedPrompt) -> bool:
    """Equal images (only then may a prefix holding them be shared)."""
    if len(a.frames) != len(b.frames):
        return False
    return all(x is y or (x.shape == y.shape and np.array_equal(x, y)) for x, y in zip(a.frames, b.frames, strict=True))


def plan_family_batches(prompts: Sequence[EncodedPrompt], families: Sequence[Family], max_requests: int,
                        max_tokens: int) -> list[list[Family]]:
    """Families grouped into batches by packed length (less padding), each batch at most
    ``max_requests`` requests and ``max_tokens`` padded tokens (a larger family goes alone)."""
    lengths = [packed_length(prompts, f) for f in families]
    order = sorted(range(len(families)), key=lambda i: (lengths[i], i))
    batches: list[list[Family]] = []
    cur: list[Family] = []
    count = 0
    for i in order:
        fam = families[i]
        if cur and (count + len(fam.members) > max_requests or lengths[i] * (len(cur) + 1) > max_tokens):
            batches.append(cur)
            cur, count = [], 0
        cur.append(fam)
        count += len(fam.members)
    if cur:
        batches.append(cur)
    return batches


def packed_length(prompts: Sequence[EncodedPrompt], fam: Family) -> int:
    """Tokens of a family's packed row: the prefix once, then every member's suffix."""
    return fam.prefix + sum(prompts[i].n_tokens - fam.prefix for i in fam.members)


def lone_families(prompts: Sequence[EncodedPrompt]) -> list[Family]:
    """Every prompt a family of its own (all but its scored last token as its "prefix"), as
    ``plan_families`` makes a prompt that shares nothing: a batch packed without padding."""
    return [Family((i,), p.n_tokens - 1) for i, p in enumerate(prompts)]


def worth_sharing(families: Sequence[Family]) -> bool:
    """Share when some family has two or more members (else the plain causal forward is used)."""
    return any(len(f.members) > 1 for f in families)


