"""How the hf engine feeds its device: requests encoded in blocks, chunks growing from a first one."""

from __future__ import annotations

import copy

import numpy as np
from hf_helpers import make_jpeg
from hypothesis import given
from hypothesis import strategies as st

from benchcheck.engines.base import Failure, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.inputs.decode import BadInput
from benchcheck.engines.hf.inputs.encoder import PromptParts
from benchcheck.engines.hf.schedule.batches import chunk_spans, encoding_blocks
from benchcheck.engines.hf.schedule.pipeline import TEXT_BLOCK, Job, Plan, first_chunk


@given(st.integers(0, 5000), st.integers(1, 300), st.integers(1, 4), st.integers(1, 3000))
def test_chunk_spans_cover_everything_once_with_no_small_tail(n: int, first: int, growth: int, window: int) -> None:
    spans = list(chunk_spans(n, first, growth, lambda lo: window))
    assert [lo for lo, _ in spans] == [0, *(hi for _, hi in spans[:-1])][: len(spans)]  # contiguous, in order
    assert (spans[-1][1] if spans else 0) == n
    sizes = [hi - lo for lo, hi in spans]
    assert all(s >= 1 for s in sizes)
    if len(sizes) >= 2:
        assert sizes[-1] >= sizes[-2] // 2  # a shorter remainder would have joined the span before it


def test_chunk_spans_grow_from_the_first() -> None:
    assert [hi - lo for lo, hi in chunk_spans(4096, 64, 2, lambda lo: 2048)] == [64, 128, 256, 512, 1024, 2112]
    assert [hi - lo for lo, hi in chunk_spans(96, 2, 2, lambda lo: 512)] == [2, 4, 8, 16, 32, 34]


def test_encoding_blocks_keep_text_runs_together_and_images_alone() -> None:
    flags = [False] * 5 + [True, True] + [False] * 3
    assert encoding_blocks(flags, 2) == [[0, 1], [2, 3], [4], [5], [6], [7, 8], [9]]
    assert encoding_blocks([], 4) == []


def test_first_chunk_depends_on_what_the_requests_carry(hf_engine: HFEngine) -> None:
    text = [Job("t", "q", (), None, None, 1)]
    video = [Job("v", "q", (b"x",) * 32, None, None, 1)]
    one = [Job("i", "q", (b"x",), None, None, 1)]
    big = Plan(max_batch_size=256, max_batch_tokens=65536)
    assert first_chunk(text, big) == 64  # a quarter batch: text encodes in milliseconds
    assert first_chunk(video, big) == 2  # 64 images' worth
    assert first_chunk(one, big) == 16
    assert first_chunk(video, Plan(256, 65536, first_chunk=3)) == 3  # the knob
    assert first_chunk(text, hf_engine._plan()) == 1  # max_batch_size 4: a quarter of it
    hf_engine.first_chunk = 2
    try:
        assert hf_engine._plan().first_chunk == 2  # the engine's attributes are the call's plan
    finally:
        hf_engine.first_chunk = None


def test_encode_many_equals_encode_one_by_one(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    parts = [
        PromptParts("Question: what?\nA. a\nB. b", (), "Answer:"),
        PromptParts("look", (make_jpeg(1), make_jpeg(2, 300, 200)), "Answer:"),
        PromptParts("  spaced <b>tag</b> ", (), None, "Be brief."),
        PromptParts("x " * 300, (make_jpeg(3),), None),
    ]
    many = enc.encode_many(parts)
    for p, m in zip(parts, many, strict=True):
        one = enc.encode(p.prompt, p.images, p.assistant_prefix, p.system)
        assert not isinstance(m, BadInput)
        assert np.array_equal(one.input_ids, m.input_ids) and np.array_equal(one.mm_token_type_ids, m.mm_token_type_ids)
        assert len(one.frames) == len(m.frames)
        assert all(np.array_equal(a, b) for a, b in zip(one.frames, m.frames, strict=True))


def test_a_bad_request_fails_alone_in_its_encoding_block(hf_engine: HFEngine) -> None:
    n = TEXT_BLOCK + 6  # two blocks of text-only requests, the bad one inside the first
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: which?\nA. yes\nB. no\nAnswer:") for i in range(n)]
    reqs[5] = ScoreRequest("placeholder", "look <|image_pad|> here")
    reqs[n - 2] = ScoreRequest("bad-image", "q", (b"not a jpeg",))
    res = hf_engine.score_sync(reqs)
    assert [r.request_id for r in res] == [r.request_id for r in reqs]
    bad = {r.request_id: r for r in res if isinstance(r, Failure)}
    assert set(bad) == {"placeholder", "bad-image"}
    assert bad["placeholder"].kind == "bad_request" and "placeholder" in bad["placeholder"].message
    assert all(isinstance(r, LetterScores) for r in res if r.request_id not in bad)
    # The same scores as each request alone (blocks change how requests are encoded, not what).
    alone = hf_engine.score_sync([reqs[0], reqs[n - 1]])
    got = {r.request_id: r for r in res}
    for a in alone:
        assert isinstance(a, LetterScores)
        b = got[a.request_id]
        assert isinstance(b, LetterScores)
        assert [t["token"] for t in a.top[:5]] == [t["token"] for t in b.top[:5]]
        assert np.allclose([float(t["logprob"]) for t in a.top[:5]], [float(t["logprob"]) for t in b.top[:5]],
                           atol=1e-4)


def test_a_tokenizer_set_to_pad_adds_no_padding(hf_engine: HFEngine) -> None:
    enc = copy.copy(hf_engine.encoder)
    enc.tokenizer = copy.deepcopy(hf_engine.encoder.tokenizer)
    enc.tokenizer.backend_tokenizer.enable_padding(pad_id=0, pad_token="<pad>")  # as a tokenizer.json may say
    parts = [PromptParts("short", (), "Answer:"), PromptParts("a much longer prompt " * 20, (), "Answer:")]
    many = enc.encode_many(parts)
    for p, m in zip(parts, many, strict=True):
        assert not isinstance(m, BadInput)
        assert np.array_equal(m.input_ids, hf_engine.encoder.encode(p.prompt, (), p.assistant_prefix).input_ids)


def test_an_encoding_fault_fails_its_block_only() -> None:
    """An exception out of the encode function (not a bad request: a fault of encoding) fails the
    requests of its block, and every other request still runs."""
    from concurrent.futures import ThreadPoolExecutor

    from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
    from benchcheck.engines.hf.schedule.pipeline import Encoded, PlannedBatch, run_pipeline

    jobs = [Job(f"r{i}", "q", (b"x",) if i == 2 else (), None, None, 1) for i in range(5)]

    def encode(block: list[Job]) -> list[Encoded | Failure]:
        if any(j.images for j in block):
            raise RuntimeError("boom")
        ids = np.arange(3, dtype=np.int64)
        return [Encoded(EncodedPrompt(ids, np.zeros_like(ids), (), None, None), 1, 0.0) for _ in block]

    def run(batch: PlannedBatch, enc: list[Encoded]) -> object:
        return lambda: [f"ok {jobs[i].request_id}" for i in batch.idx]

    with ThreadPoolExecutor(2) as threads:
        out = run_pipeline(jobs, encode, threads, Plan(4, 1 << 20, first_chunk=5), run)  # type: ignore[arg-type]
    assert out[:2] == ["ok r0", "ok r1"] and out[3:] == ["ok r3", "ok r4"]
    assert isinstance(out[2], Failure) and out[2].request_id == "r2" and out[2].kind == "internal"
    assert out[2].message == "encoding failed: RuntimeError: boom"


def test_a_chunks_largest_batch_runs_last() -> None:
    """Within a chunk the batch with the most planned tokens (padded rows; packed families) is
    queued last: the device then has the most work while the host lands results and plans the
    next chunk. Results stay in request order."""
    from concurrent.futures import ThreadPoolExecutor

    from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
    from benchcheck.engines.hf.schedule.pipeline import Encoded, PlannedBatch, run_pipeline

    rows: list[np.ndarray] = []

    def encode(block: list[Job]) -> list[Encoded | Failure]:
        out: list[Encoded | Failure] = []
        for j in block:
            ids = rows[int(j.request_id[1:])]
            out.append(Encoded(EncodedPrompt(ids, np.zeros_like(ids), (), None, None), 1, 0.0))
        return out

    ran: list[list[int]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> object:
        ran.append(batch.idx)
        return lambda: [f"ok {jobs[i].request_id}" for i in batch.idx]

    def call(tokens: list[np.ndarray], share: bool = False) -> None:
        rows[:] = tokens
        ran.clear()
        with ThreadPoolExecutor(2) as threads:
            out = run_pipeline(jobs, encode, threads, Plan(4, 1 << 20, first_chunk=len(jobs)), run,  # type: ignore[arg-type]
                               share=share)
        assert out == [f"ok r{i}" for i in range(len(jobs))]

    jobs = [Job(f"r{i}", "q", (), None, None, 1) for i in range(7)]
    # Planned by length, as even as two batches allow: [0, 1, 2, 3] (4 rows of 10 tokens: 40)
    # and [4, 5, 6] (3 of 11: 33): the smaller runs first.
    call([np.arange(n) for n in (10, 10, 10, 10, 11, 11, 11)])
    assert ran == [[4, 5, 6], [0, 1, 2, 3]]
    # [0, 1, 2, 3] (4 x 10: 40) and [4, 5, 6] (3 x 30: 90): already last.
    call([np.arange(n) for n in (10, 10, 10, 10, 11, 11, 30)])
    assert ran == [[0, 1, 2, 3], [4, 5, 6]]
    # Shared prefixes: two families of 2 (30 shared tokens + 1 each: 32 packed) fill one batch of
    # 4 requests (64 tokens); the lone 33-token prompt is the other batch (33): it runs first.
    jobs = jobs[:5]
    call([np.r_[np.arange(30), 900], np.r_[np.arange(30), 901], np.r_[np.arange(100, 130), 900],
          np.r_[np.arange(100, 130), 901], np.arange(500, 533)], share=True)
    assert ran == [[4], [0, 1, 2, 3]]


def test_requests_that_share_nothing_never_ride_in_a_packed_batch() -> None:
    """A chunk with a few families and many lone requests: the families run packed in batches of
    their own, the lone requests in plain batches (no families), though one batch could hold all.
    (A lone request in a packed batch costs the tree attention's slower kernel for nothing.)"""
    from concurrent.futures import ThreadPoolExecutor

    from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
    from benchcheck.engines.hf.schedule.pipeline import Encoded, PlannedBatch, run_pipeline

    rows = [np.r_[np.arange(30), 900], np.r_[np.arange(30), 901], np.arange(200, 240), np.arange(300, 335),
            np.r_[np.arange(100, 130), 900], np.r_[np.arange(100, 130), 901], np.arange(400, 437)]
    jobs = [Job(f"r{i}", "q", (), None, None, 1) for i in range(len(rows))]

    def encode(block: list[Job]) -> list[Encoded | Failure]:
        return [Encoded(EncodedPrompt(rows[int(j.request_id[1:])], np.zeros_like(rows[int(j.request_id[1:])]), (),
                                      None, None), 1, 0.0) for j in block]

    ran: list[tuple[list[int], list[tuple[int, ...]]]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> object:
        ran.append((batch.idx, [tuple(batch.idx[m] for m in f.members) for f in batch.families]))
        return lambda: [f"ok {jobs[i].request_id}" for i in batch.idx]

    with ThreadPoolExecutor(2) as threads:
        out = run_pipeline(jobs, encode, threads, Plan(16, 1 << 20, first_chunk=len(jobs)), run,  # type: ignore[arg-type]
                           share=True)
    assert out == [f"ok r{i}" for i in range(len(jobs))]
    assert sorted((sorted(idx), fams) for idx, fams in ran) == [([0, 1, 4, 5], [(0, 1), (4, 5)]), ([2, 3, 6], [])]
    # Prompts short enough to run unpadded in one row anyway: the lone ones ride with the families.
    ran.clear()
    with ThreadPoolExecutor(2) as threads:
        run_pipeline(jobs, encode, threads, Plan(16, 1 << 20, first_chunk=len(jobs), one_row_tokens=64), run,  # type: ignore[arg-type]
                     share=True)
    assert [(sorted(idx), sorted(fams)) for idx, fams in ran] == [
        (list(range(7)), [(0, 1), (2,), (3,), (4, 5), (6,)])]
    # One prompt of the chunk longer than that (40 > 36 tokens): the lone ones run apart again.
    ran.clear()
    with ThreadPoolExecutor(2) as threads:
        run_pipeline(jobs, encode, threads, Plan(16, 1 << 20, first_chunk=len(jobs), one_row_tokens=36), run,  # type: ignore[arg-type]
                     share=True)
    assert sorted((sorted(idx), fams) for idx, fams in ran) == [([0, 1, 4, 5], [(0, 1), (4, 5)]), ([2, 3, 6], [])]
