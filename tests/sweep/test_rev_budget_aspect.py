"""A video more elongated than Qwen3-VL's processor accepts (aspect ratio over 200): its sweep cells
are failures of their frame plan, in the dry run and in the run, never requests sent to be refused.
Before, the dry run counted them as todo with a token projection and the run sent each three times."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from sweep_helpers import dry_rows, item, scripted_run, stored_video, write_items

from benchcheck.atomic import write_json_atomic
from benchcheck.engines.hf.inputs.decode import ResizeRule
from benchcheck.imagesize import MAX_ASPECT, QWEN3_VL_FACTOR, QWEN3_VL_MAX_PIXELS, QWEN3_VL_MIN_PIXELS, processor_size
from benchcheck.video.meta import VideoMeta, video_dir
from benchcheck.video.plans import tokens_per_frame

CONDS = "v_1,v_32,v_fps2_s224"


def _thin_video(store: Path, video_id: str, n_frames: int, width: int, height: int) -> None:
    """A stored 2-fps H.264 video smaller than ``synth.make_test_video`` makes (4 pixels high)."""
    d = video_dir(store, video_id)
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with av.open(str(d / "video.mp4"), "w") as c:
        s = c.add_stream("libx264", rate=2)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        for _ in range(n_frames):
            c.mux(s.encode(av.VideoFrame.from_ndarray(rng.integers(0, 255, (height, width, 3), np.uint8),
                                                      format="rgb24")))
        c.mux(s.encode())
    meta = VideoMeta(content_hash=video_id, width=width, height=height, duration=n_frames / 2, fps=2.0,
                     n_frames=n_frames, timestamps=[i / 2 for i in range(n_frames)], too_short=False)
    write_json_atomic(d / "meta.json", meta.to_json())


@pytest.mark.parametrize(("w", "h"), [(1280, 4), (4, 1280), (448, 2)])
def test_the_budget_refuses_what_the_processor_refuses(w: int, h: int) -> None:
    with pytest.raises(ValueError, match=f"aspect ratio of {w}x{h} is over {MAX_ASPECT}"):
        tokens_per_frame(w, h)
    with pytest.raises(ValueError, match="is over"):
        ResizeRule(QWEN3_VL_FACTOR, QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS).size(h, w)
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    with pytest.raises(ValueError, match="must be smaller than 200"):
        smart_resize(h, w, QWEN3_VL_FACTOR, QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS)
    # at exactly 200 both accept, and agree
    assert (processor_size(6, 1200, QWEN3_VL_FACTOR, QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS)
            == smart_resize(6, 1200, QWEN3_VL_FACTOR, QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS))


def test_an_over_elongated_video_is_a_plan_failure_in_dry_run_and_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _thin_video(store, "thin", 40, 1280, 4)
    stored_video(store, "qcif", 40, 176, 144)
    items = write_items(tmp_path / "items", [item("Thin", 0, "thin"), item("Qcif", 0, "qcif")])
    common = [a for p in items for a in ("--items", str(p))] + [
        "--store", str(store), "--results", str(tmp_path / "res"), "--conds", CONDS]

    rows = dry_rows(common)
    for cond in CONDS.split(","):
        todo, _na, _reuse, fail = rows[("Thin", cond)][:4]
        assert (todo, fail) == ("0", "1"), rows
        assert rows[("Qcif", cond)][:4] == ["1", "0", "0", "0"], rows

    written, failures = scripted_run(tmp_path, common)
    thin = [r for r in written if r.startswith("Thin,")]  # one error row per cell, the reason in its meta
    assert len(thin) == 3 and all(",error,," in r and "aspect ratio of 1280x4 is over 200" in r for r in thin)
    assert len([r for r in written if r.startswith("Qcif,")]) == 3
    assert sorted(f["condition"] for f in failures) == sorted(CONDS.split(","))
    assert all("aspect ratio of 1280x4 is over 200" in f["message"] for f in failures)
