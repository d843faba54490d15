"""Image decoding of the hf engine: the processor's resize rule, and worker processes that decode
exactly what the calling thread decodes, fail one request at a time and survive a dead worker."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import signal
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hf_helpers import make_jpeg
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from benchcheck.engines.base import Failure, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.inputs.decode import (
    BadInput,
    FrameDecoder,
    ResizeRule,
    SharedFrames,
    decode,
    in_shared_memory,
    load_image,
    shared_room,
)


@pytest.fixture(autouse=True)
def no_frame_memo(hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request here decodes its own images (the engine's memo would serve repeats)."""
    monkeypatch.setattr(hf_engine.encoder.memo, "capacity", 0)


def in_worker() -> bool:
    return multiprocessing.parent_process() is not None


def dies_on_marker(refs: list[bytes | Path], rule: ResizeRule, first: int) -> list[np.ndarray]:
    """A worker's work that kills the worker when a request holds the marker image."""
    if b"die" in refs and in_worker():
        os._exit(3)
    return decode(refs, rule, first)


def raises_on_marker(refs: list[bytes | Path], rule: ResizeRule, first: int) -> list[np.ndarray]:
    """A work that raises what a decoding library might on a marker image, in a live worker."""
    if b"oserror" in refs:
        raise OSError("decoder error -2 on the marker")
    if b"runtimeerror" in refs:
        raise RuntimeError("decoder state on the marker")
    return decode(refs, rule, first)


def dies_in_workers(refs: list[bytes | Path], rule: ResizeRule, first: int) -> list[np.ndarray]:
    """Works in the calling thread only, as when workers cannot start."""
    if in_worker():
        os._exit(3)
    return decode(refs, rule, first)


def environment_of_worker(refs: list[bytes | Path], rule: ResizeRule, first: int) -> list[np.ndarray]:
    """Reports the worker's secret-looking variables through the frame count."""
    return [np.zeros(1)] * sum(1 for k in ("OPENAI_API_KEY", "EVAL_LLM_JUDGE_KEY") if k in os.environ)


@given(st.integers(1, 5000), st.integers(1, 5000), st.sampled_from([28, 32]),
       st.sampled_from([(3136, 12845056), (65536, 16777216), (200_000, 300_000)]))
@settings(max_examples=300, deadline=None)
def test_resize_rule_is_the_processors_smart_resize(h: int, w: int, factor: int, bounds: tuple[int, int]) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    rule = ResizeRule(factor, *bounds)
    assert ResizeRule(None).size(h, w) == (h, w)  # no resizing
    with contextlib.suppress(ValueError):  # both with their defaults
        assert ResizeRule(factor).size(h, w) == smart_resize(h, w, factor=factor)
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
        assert no_blocks_soon()  # the failed requests' other pieces: their blocks removed
    finally:
        pool.close()


def our_blocks() -> set[str]:
    """This process's frame blocks now in /dev/shm (``hf_decode`` names them ``bc<pid>_...``)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"bc{os.getpid()}_")}


def no_blocks_soon() -> bool:
    """Whether every block of this process is gone within 10 s (blocks of unread pieces are
    removed when their tasks end, in the pool's thread)."""
    deadline = time.monotonic() + 10
    while our_blocks() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not our_blocks()


def dies_late_on_marker(refs: list[bytes | Path], rule: ResizeRule, first: int) -> list[np.ndarray]:
    """A worker that dies on the marker after its sibling pieces have had time to finish."""
    if b"die" in refs and in_worker():
        time.sleep(0.4)
        os._exit(1)
    return decode(refs, rule, first)


def decoded_slowly(refs: list[bytes | Path], rule: ResizeRule, first: int) -> list[np.ndarray]:
    """``decode``, and a piece that does not start at 0 takes its time (it finishes after the
    request it belongs to has already failed)."""
    if first:
        time.sleep(0.3)
    return raises_on_marker(refs, rule, first)


@pytest.mark.skipif(not shared_room(), reason="no room in /dev/shm")
def test_frames_come_back_in_shared_memory_and_no_block_is_left(hf_engine: HFEngine,
                                                                images: list[bytes | Path]) -> None:
    rule = hf_engine.encoder.decoder.rule
    # Earlier tests' failed requests leave pieces whose blocks go when those tasks end, in
    # their pools' threads: wait for them rather than race them.
    assert no_blocks_soon()
    # What a worker returns: a block's name and the arrays' layout, not the arrays.
    handed = in_shared_memory(decode, images[:3], rule, 0, f"bc{os.getpid()}_test")
    assert isinstance(handed, SharedFrames) and len(handed.layout) == 3 and handed.name in our_blocks()
    assert all(np.array_equal(a, b) for a, b in zip(handed.take(), decode(images[:3], rule), strict=True))
    assert handed.name not in our_blocks()  # taken: removed
    pool = FrameDecoder(rule, processes=2, piece=1, work=decoded_slowly)
    assert pool.shared
    try:
        assert all(np.array_equal(a, b) for a, b in zip(pool.frames(images), decode(images, rule), strict=True))
        # A request that fails in its first piece: its later pieces, already running in the
        # other worker, finish after the failure, and their blocks are removed unread.
        with pytest.raises(OSError):
            pool.frames([b"oserror", images[0], images[1]])
        time.sleep(0.5)
        assert no_blocks_soon()
    finally:
        pool.close()
    # A worker that dies: the blocks its siblings made before the pool broke are removed too.
    dying = FrameDecoder(rule, processes=2, piece=1, work=dies_late_on_marker)
    try:
        dying.frames(images[:2])  # the workers work (else decoding would move to this thread)
        with pytest.raises(BadInput, match="died, twice"):
            dying.frames([images[0], images[1], b"die", images[2]])
        assert no_blocks_soon()
    finally:
        dying.close()
    piped = FrameDecoder(rule, processes=1, shared=False)  # the pipe, as where /dev/shm is small
    try:
        assert not piped.shared
        assert all(np.array_equal(a, b) for a, b in zip(piped.frames(images), decode(images, rule), strict=True))
    finally:
        piped.close()


def test_no_shared_memory_without_room(tmp_path: Path) -> None:
    assert not shared_room(str(tmp_path / "missing"))


def test_a_worker_that_dies_on_a_request_fails_only_that_request(hf_engine: HFEngine,
                                                                 images: list[bytes | Path]) -> None:
    pool = FrameDecoder(hf_engine.encoder.decoder.rule, processes=1, work=dies_on_marker)
    try:
        good = pool.frames(images[:2])
        with pytest.raises(BadInput, match="decoding worker process died, twice"):
            pool.frames([images[0], b"die"])
        again = pool.frames(images[:2])  # a fresh pool for the next request
        assert all(np.array_equal(a, b) for a, b in zip(good, again, strict=True))
    finally:
        pool.close()


@pytest.mark.parametrize(("marker", "error"), [(b"oserror", OSError), (b"runtimeerror", RuntimeError)])
def test_an_error_of_the_work_fails_its_request_and_keeps_the_pool(
        hf_engine: HFEngine, images: list[bytes | Path], caplog: pytest.LogCaptureFixture, marker: bytes,
        error: type[Exception]) -> None:
    rule = hf_engine.encoder.decoder.rule
    with pytest.raises(error) as here:
        raises_on_marker([images[0], marker], rule, 0)  # in the thread
    pool = FrameDecoder(rule, processes=1, piece=1, work=raises_on_marker)
    try:
        # The pool's first request: its worker raises (the worker lives on), nothing died.
        with pytest.raises(error) as there:
            pool.frames([images[0], marker, images[1]])
        assert str(there.value) == str(here.value)  # the request fails as it does in the thread
        started = pool._pool
        assert started is not None and pool.processes == 1 and "could not start" not in caplog.text
        good = pool.frames(images[:2])
        assert pool._pool is started  # the same pool: not replaced
        assert all(np.array_equal(a, b) for a, b in zip(good, decode(images[:2], rule), strict=True))
    finally:
        pool.close()


def test_workers_that_cannot_work_turn_worker_decoding_off(hf_engine: HFEngine, images: list[bytes | Path],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    pool = FrameDecoder(hf_engine.encoder.decoder.rule, processes=1, work=dies_in_workers)
    here = decode(images[:2], pool.rule)
    got = pool.frames(images[:2])  # two pools died without finishing a task: decoded here
    assert all(np.array_equal(a, b) for a, b in zip(here, got, strict=True))
    assert pool.processes == 0 and pool._pool is None and "could not start" in caplog.text
    pool.close()


def test_workers_ignore_ctrl_c_and_drop_secrets(hf_engine: HFEngine, images: list[bytes | Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("EVAL_LLM_JUDGE_KEY", "judge-secret")
    rule = hf_engine.encoder.decoder.rule
    spy = FrameDecoder(rule, processes=1, work=environment_of_worker)
    try:
        assert spy.frames([images[0]]) == []  # neither variable reached the worker's environment
    finally:
        spy.close()
    pool = FrameDecoder(rule, processes=1)
    try:
        pool.frames(images[:1])
        started = pool._pool
        assert started is not None
        for pid in list(started._processes):  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGINT)
        assert len(pool.frames(images[:2])) == 2
        assert pool._pool is started  # the same workers: none died of the interrupt
    finally:
        pool.close()


def test_changing_processes_replaces_the_pool_and_close_is_final(hf_engine: HFEngine,
                                                                 images: list[bytes | Path]) -> None:
    pool = FrameDecoder(hf_engine.encoder.decoder.rule, processes=1)
    pool.frames(images[:1])
    first = pool._pool
    pool.processes = 2
    pool.frames(images[:2])
    assert pool._pool is not first and pool._pool is not None
    assert pool._pool._max_workers == 2  # type: ignore[attr-defined]
    pool.close()
    assert len(pool.frames(images[:2])) == 2 and pool._pool is None  # decoded here, no new pool


def test_load_image_leaves_no_file_open(tmp_path: Path) -> None:
    pages = [Image.fromarray(np.full((20, 30, 3), v, np.uint8)) for v in (10, 200)]
    tiff, jpg = tmp_path / "two.tif", tmp_path / "one.jpg"
    pages[0].save(tiff, save_all=True, append_images=pages[1:])
    jpg.write_bytes(make_jpeg(1))
    for path in (tiff, jpg):
        im = load_image(path, 0)
        assert im.mode == "RGB" and np.asarray(im).shape[2] == 3
        assert open_on(path) == 0, path


def open_on(path: Path) -> int:
    """This process's file descriptors open on ``path`` (not a count of all of them: a pool that
    an earlier test closed may close its pipes meanwhile, in the background)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # gone since listed
            n += os.readlink(f"/proc/self/fd/{fd}") == str(path.resolve())
    return n


def test_a_dead_worker_loses_no_request(hf_engine: HFEngine, images: list[bytes | Path]) -> None:
    rule = hf_engine.encoder.decoder.rule
    pool = FrameDecoder(rule, processes=1)
    try:
        first = pool.frames(images[:2])
        started = pool._pool
        assert started is not None
        for pid in list(started._processes):  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
        again = pool.frames(images[:2])  # tried again in a new pool
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


def broken_png(path: Path) -> Path:
    """A PNG file whose first IDAT chunk says it is 5 bytes shorter than it is: PIL reads the next
    chunk's header from inside the image data and raises SyntaxError (not OSError)."""
    data = bytearray(_png("RGB"))
    at = 8 + 12 + 13  # the signature, then IHDR (length, type, 13 bytes, CRC): the first IDAT
    assert data[at + 4 : at + 8] == b"IDAT"
    (n,) = struct.unpack(">I", data[at : at + 4])
    data[at : at + 4] = struct.pack(">I", n - 5)
    path.write_bytes(bytes(data))
    return path


def test_a_corrupt_image_file_fails_its_request_alone_in_workers(hf_engine: HFEngine, tmp_path: Path) -> None:
    bad = broken_png(tmp_path / "broken.png")
    reqs = [ScoreRequest("good", "what?", (make_jpeg(6),)), ScoreRequest("bad", "q", (make_jpeg(1), bad)),
            ScoreRequest("also good", "q", (make_jpeg(2, 300, 200),), "Answer:")]
    decoder = hf_engine.encoder.decoder
    chosen = decoder.processes
    threads = hf_engine.score_sync(reqs)  # decoded in the engine's threads (the CPU's choice)
    decoder.processes = 1
    try:
        hf_engine.score_sync(reqs[:1])
        started = decoder._pool
        procs = hf_engine.score_sync(reqs)
        assert started is not None and decoder._pool is started  # the worker lived: the pool stays
    finally:
        decoder.processes = chosen
    for res in (threads, procs):
        failure = res[1]
        assert isinstance(failure, Failure) and failure.kind == "bad_request"
        assert failure.message == f"image 1 ({bad}): not a readable image (SyntaxError)"
    for t, p in zip(threads[::2], procs[::2], strict=True):  # the good requests of the same call
        assert isinstance(t, LetterScores) and isinstance(p, LetterScores) and t.top == p.top


class _ZeroSize(ResizeRule):
    """A resize rule that sends every image to 0 x 0, which PIL refuses to resize to."""

    def size(self, height: int, width: int) -> tuple[int, int]:
        return 0, 0


def test_an_image_that_cannot_be_resized_is_its_own_one_line_error() -> None:
    with pytest.raises(BadInput, match=r"^image 3 \(\d+ bytes\): not a readable image \(ValueError\)$"):
        decode([make_jpeg(1)], _ZeroSize(factor=32), first=3)
