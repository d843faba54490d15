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
from benchcheck.engines.hf import HFEngine
from benchcheck.engines.hf_decode import BadInput
from benchcheck.engines.hf_frame_memo import FrameMemo, memo_key
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
    path.write_bytes(make_jpeg(5, w=320))  # new content, new size
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    b = memo.frames([str(path)], decode)
    assert decode.calls == 2 and b[0].shape != a[0].shape
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
    before = hf_engine.encoder.memo.decoded
    prompts = [hf_engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    assert hf_engine.encoder.memo.decoded - before == 2
    for v in range(2):
        mine = prompts[3 * v : 3 * v + 3]
        assert all(p.frames[k] is mine[0].frames[k] for p in mine for k in range(32))
    assert not any(a is b for a, b in zip(prompts[0].frames, prompts[3].frames, strict=True))
