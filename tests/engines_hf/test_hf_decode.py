"""Image decoding of the hf engine: the processor's resize rule, and worker processes that decode
exactly what the calling thread decodes, fail one request at a time and survive a dead worker."""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from hf_helpers import make_jpeg
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from benchcheck.engines.base import LetterScores, ScoreRequest
from benchcheck.engines.hf import HFEngine
from benchcheck.engines.hf_decode import BadInput, FrameDecoder, ResizeRule, decode


@given(st.integers(1, 5000), st.integers(1, 5000), st.sampled_from([28, 32]),
       st.sampled_from([(3136, 12845056), (65536, 16777216), (200_000, 300_000)]))
@settings(max_examples=300, deadline=None)
def test_resize_rule_is_the_processors_smart_resize(h: int, w: int, factor: int, bounds: tuple[int, int]) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    rule = ResizeRule(factor, *bounds)
    try:
        expected = smart_resize(h, w, factor=factor, min_pixels=bounds[0], max_pixels=bounds[1])
    except ValueError:
        with pytest.raises(ValueError, match="aspect ratio"):
            rule.size(h, w)
        return
    assert rule.size(h, w) == expected


def _png(mode: str, size: tuple[int, int] = (300, 200)) -> bytes:
    rng = np.random.default_rng(len(mode))
    channels = {"RGBA": 4, "L": 1, "RGB": 3}[mode]
    arr = rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr.squeeze(-1) if channels == 1 else arr, mode).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[bytes | Path]:
    path = tmp_path_factory.mktemp("img") / "frame.jpg"
    path.write_bytes(make_jpeg(7, 640, 360))
    return [make_jpeg(1), make_jpeg(2, 300, 200), _png("RGBA"), _png("L", (17, 900)), path, make_jpeg(3, 448, 252)]


def test_workers_decode_exactly_what_the_thread_decodes(hf_engine: HFEngine, images: list[bytes | Path]) -> None:
    rule = hf_engine.encoder.decoder.rule
    here = decode(images, rule)
    pool = FrameDecoder(rule, processes=2, piece=2)
    try:
        there = pool.frames(images)
        assert len(there) == len(here)
        for a, b in zip(here, there, strict=True):
            assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape and np.array_equal(a, b)
        # A bad image fails its request, named by its index in the request, from any piece.
        with pytest.raises(BadInput, match=r"image 3 \(9 bytes\): not a readable image"):
            pool.frames([*images[:3], b"not a jpg", images[0]])
        with pytest.raises(BadInput, match=r"image 1 .*aspect ratio"):
            pool.frames([images[0], _png("RGB", (1, 400))])
        assert len(pool.frames(images[:2])) == 2  # the pool still works after failures
    finally:
        pool.close()


def test_a_dead_worker_loses_no_request(hf_engine: HFEngine, images: list[bytes | Path]) -> None:
    rule = hf_engine.encoder.decoder.rule
    pool = FrameDecoder(rule, processes=1)
    try:
        first = pool.frames(images[:2])
        started = pool._pool
        assert started is not None
        for pid in list(started._processes):  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
        again = pool.frames(images[:2])  # decoded here, and a new pool started for what follows
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
        later = pool.frames(images[:2])
        assert all(np.array_equal(a, b) for a, b in zip(first, later, strict=True))
        assert pool._pool is not None and pool._pool is not started
    finally:
        pool.close()


def test_engine_scores_the_same_with_decoding_processes(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu", max_batch_size=4)
    reqs = [ScoreRequest("a", "q", (make_jpeg(4), make_jpeg(5, 300, 200)), "Answer:"),
            ScoreRequest("b", "what?", (make_jpeg(6),)), ScoreRequest("bad", "q", (make_jpeg(1), b"nope"))]
    threads = engine.score_sync(reqs)
    engine.encoder.decoder.processes = 2
    try:
        procs = engine.score_sync(reqs)
    finally:
        engine.encoder.decoder.close()
    for t, p in zip(threads, procs, strict=True):
        assert type(t) is type(p)
        if isinstance(t, LetterScores):
            assert isinstance(p, LetterScores) and t.top == p.top
    assert not isinstance(procs[2], LetterScores) and "image 1" in procs[2].message  # type: ignore[union-attr]
