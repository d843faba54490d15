"""One video's questions decode its frames once (``hf_frame_memo``), with real JPEGs and the
engine's own decoder."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hf_helpers import make_jpeg

from benchcheck.engines.base import ImageRef
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.inputs.decode import BadInput
from benchcheck.engines.hf.inputs.frame_memo import FrameMemo, memo_key
from benchcheck.items import Item
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec


class Counting:
    """The engine's decoder, counting the image sets it is asked to decode."""

    def __init__(self, engine: HFEngine, delay: float = 0.0) -> None:
        self.engine, self.delay, self.calls = engine, delay, 0
        self._lock = threading.Lock()

    def __call__(self, images: Sequence[ImageRef]) -> list[np.ndarray]:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return self.engine.encoder.decoder.frames(images)


def test_the_same_bytes_decode_once_into_shared_read_only_frames(hf_engine: HFEngine) -> None:
    memo, decode = FrameMemo(), Counting(hf_engine)
    grid = [make_jpeg(1), make_jpeg(2), make_jpeg(1)]
    first = memo.frames(grid, decode)
    again = memo.frames(list(grid), decode)  # another request naming the same images
    other = memo.frames([make_jpeg(3)], decode)
    assert decode.calls == 2 and memo.decoded == 2
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert all(not f.flags.writeable for f in first + other)
    fresh = hf_engine.encoder.decoder.frames(grid)
    assert all(np.array_equal(a, b) for a, b in zip(first, fresh, strict=True))


def test_a_file_rewritten_is_decoded_again(hf_engine: HFEngine, tmp_path: Path) -> None:
    memo, decode = FrameMemo(), Counting(hf_engine)
    path = tmp_path / "f.jpg"
    path.write_bytes(make_jpeg(4))
    a = memo.frames([str(path)], decode)
    assert memo.frames([str(path)], decode)[0] is a[0] and decode.calls == 1
    # New content of the same size, its modification time set back: the change time still moves.
    old, st = path.read_bytes(), path.stat()
    new = make_jpeg(5)
    new = new[: len(old)] + b"\0" * max(0, len(old) - len(new))  # JPEG decoders stop at their end marker
    with path.open("r+b") as f:
        f.write(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    time.sleep(0.01)
    b = memo.frames([str(path)], decode)
    assert decode.calls == 2 and not np.array_equal(a[0], b[0])
    assert np.array_equal(b[0], hf_engine.encoder.decoder.frames([str(path)])[0])


def test_a_failure_is_not_kept_and_a_missing_file_is_not_remembered(hf_engine: HFEngine, tmp_path: Path) -> None:
    memo, decode = FrameMemo(), Counting(hf_engine)
    bad: list[ImageRef] = [make_jpeg(6), b"not an image"]
    for _ in range(2):
        with pytest.raises(BadInput, match="image 1"):
            memo.frames(bad, decode)
    assert decode.calls == 2 and memo.decoded == 0
    missing = [str(tmp_path / "gone.jpg")]
    assert memo_key(missing) is None
    with pytest.raises(BadInput, match="image 0"):
        memo.frames(missing, decode)


def test_threads_asking_for_one_set_meanwhile_decode_it_once(hf_engine: HFEngine) -> None:
    memo, decode = FrameMemo(), Counting(hf_engine, delay=0.2)
    grid = [make_jpeg(7), make_jpeg(8)]
    got: list[list[np.ndarray]] = []
    threads = [threading.Thread(target=lambda: got.append(memo.frames(grid, decode))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert decode.calls == 1 and len(got) == 8
    assert all(g[0] is got[0][0] and g[1] is got[0][1] for g in got)


def test_the_least_recently_used_sets_go_first(hf_engine: HFEngine) -> None:
    one = hf_engine.encoder.decoder.frames([make_jpeg(9)])[0].nbytes
    memo, decode = FrameMemo(capacity=2 * one), Counting(hf_engine)
    a, b, c = [make_jpeg(9)], [make_jpeg(10)], [make_jpeg(11)]
    memo.frames(a, decode)
    memo.frames(b, decode)
    memo.frames(a, decode)  # a is now the most recent
    memo.frames(c, decode)  # b goes
    assert decode.calls == 3
    memo.frames(a, decode)
    assert decode.calls == 3
    memo.frames(b, decode)
    assert decode.calls == 4
    off = FrameMemo(capacity=0)
    off.frames(a, decode)
    off.frames(a, decode)
    assert decode.calls == 6 and off.decoded == 0


def test_an_engines_video_questions_hold_one_copy_of_its_frames(hf_engine: HFEngine) -> None:
    videos = [[make_jpeg(20 + 32 * v + i) for i in range(32)] for v in range(2)]
    reqs = [r for v, grid in enumerate(videos) for q in range(3)
            for r in build_item_requests(default_run_spec(3), Item(f"v{v}q{q}", "demo", f"Question {q} of {v}?",
                                                                    ["a", "b", "c"], 0, video_id=f"vid{v}"),
                                         grid).requests]
    hf_engine.encoder.memo.clear()  # whatever other tests left there
    before = hf_engine.encoder.memo.decoded
    prompts = [hf_engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    assert hf_engine.encoder.memo.decoded - before == 2
    for v in range(2):
        mine = prompts[3 * v : 3 * v + 3]
        assert all(p.frames[k] is mine[0].frames[k] for p in mine for k in range(32))
    assert not any(a is b for a, b in zip(prompts[0].frames, prompts[3].frames, strict=True))


class FailsFirst:
    """A decoder whose first call waits for ``release`` and then raises ``kind``; later calls
    return a frame."""

    def __init__(self, kind: type[Exception]) -> None:
        self.kind, self.calls = kind, 0
        self.started, self.release = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def __call__(self, images: Sequence[ImageRef]) -> list[np.ndarray]:
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.started.set()
            self.release.wait(5)
            raise self.kind("image 0: not a readable image")
        return [np.zeros((2, 2, 3), np.uint8)]


@pytest.mark.parametrize("kind", [BadInput, MemoryError])
def test_waiters_get_the_images_failure_and_decode_themselves_after_any_other(kind: type[Exception]) -> None:
    """The thread decoding a set fails: requests that waited for it get its ``BadInput`` (the
    images' own failure) as a new exception, or decode for themselves after any other failure;
    nothing is left pending (a later request decodes again)."""
    memo, decode = FrameMemo(), FailsFirst(kind)
    results: list[object] = []

    def ask() -> None:
        try:
            results.append(memo.frames([b"x"], decode))
        except (BadInput, MemoryError) as e:
            results.append(e)

    first = threading.Thread(target=ask)
    first.start()
    assert decode.started.wait(5)
    waiters = [threading.Thread(target=ask) for _ in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.2)  # the waiters are waiting on the first thread's decoding
    decode.release.set()
    for t in [first, *waiters]:
        t.join(10)
    assert len(results) == 4
    failed = [r for r in results if isinstance(r, Exception)]
    if kind is BadInput:
        assert len(failed) == 4 and len({id(e) for e in failed}) == 4 and decode.calls == 1
        assert all("image 0" in str(e) for e in failed)
    else:
        assert len(failed) == 1 and decode.calls == 4  # each waiter decoded for itself
    assert memo.frames([b"x"], decode)[0].shape == (2, 2, 3)  # nothing left pending


def test_a_smaller_capacity_lets_go_at_once_and_clear_forgets(hf_engine: HFEngine) -> None:
    memo, decode = FrameMemo(), Counting(hf_engine)
    sets = [[make_jpeg(40 + i)] for i in range(3)]
    for s in sets:
        memo.frames(s, decode)
    one = memo.frames(sets[2], decode)[0].nbytes
    memo.capacity = one  # only the most recent set stays
    memo.frames(sets[2], decode)
    assert decode.calls == 3
    memo.frames(sets[1], decode)
    assert decode.calls == 4
    memo.clear()
    memo.frames(sets[1], decode)
    assert decode.calls == 5
