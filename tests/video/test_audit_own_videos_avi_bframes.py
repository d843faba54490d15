"""H.264 with B-frames in AVI (what ffmpeg or PyAV write for ``-c:v libx264 out.avi``): the AVI
demuxer stamps such packets in decode order, so matching frames by pts stored each 2 fps slot
with a frame a few frames off its time (a B-frame's neighbour). The decoder's output order is
the frames' order, and the stored frames are now the ones nearest each slot."""

from __future__ import annotations

import json
from pathlib import Path

import av
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.video.synth import paint_frame, read_frame_index


def _avi(path: Path, codec: str, n: int, fps: int, bframes: int) -> None:
    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        stream.codec_context.max_b_frames = bframes
        for i in range(n):
            for packet in stream.encode(av.VideoFrame.from_ndarray(paint_frame(i, 160, 96), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _stored_indices(store: Path) -> dict[str, list[int]]:
    out = {}
    for line in (store / "index.jsonl").read_text().splitlines():
        row = json.loads(line)
        folder = store / "normalized" / row["content_hash"]
        with av.open(str(folder / "video.mp4")) as c:
            out[row["key"].rsplit("::", 1)[1]] = [read_frame_index(f.to_ndarray(format="rgb24"))
                                                  for f in c.decode(video=0)]
    return out


def test_h264_avi_with_b_frames_keeps_each_slot_frame(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    _avi(videos / "x264.avi", "libx264", 60, 10, 3)
    _avi(videos / "mpeg4.avi", "mpeg4", 60, 10, 2)  # its demuxer rebuilds pts: matched by pts
    store = tmp_path / "store"
    res = CliRunner().invoke(main, ["videos", "normalize", str(videos), "--store", str(store), "--no-progress"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    want = [5 * j for j in range(12)]  # 2 fps slots over a 10 fps source
    assert _stored_indices(store) == {"x264.avi": want, "mpeg4.avi": want}
    metas = {json.loads((p / "meta.json").read_text())["source"]["key"].rsplit("::", 1)[1]:
             json.loads((p / "meta.json").read_text())["source"] for p in (store / "normalized").iterdir()}
    assert metas["x264.avi"]["decode_order_pts"] is True
    assert metas["mpeg4.avi"]["decode_order_pts"] is False
