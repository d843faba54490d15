"""``video_url`` parts on a real loopback server: a clip (a data URL, or a ``file://`` URL under
``--allowed-local-media-path``) reaches the engine as its sampled frames, in order, as vLLM's
video loader picks them; bad clips, paths outside the folder, symlinks out of it and network
URLs are one-line 400s. Clips are real H.264 mp4s whose frames paint their own index."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serve_fixtures import cli_server, post_chat

from benchcheck.engines.base import Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.rules.scripted import ScriptedEngine
from benchcheck.serve.app import build_app
from benchcheck.serve.media import MediaOptions, sample_indices
from benchcheck.video.synth import make_test_video, read_frame_index
from loopback import thread_server


class RecordingEngine(ScriptedEngine):
    """The scripted engine, keeping the images of every request it is handed."""

    def __init__(self, rules: list[dict[str, Any]]) -> None:
        super().__init__(rules, name="vlm")
        self.seen: list[tuple[bytes, ...]] = []

    def _keep(self, reqs: Sequence[ScoreRequest | GenerateRequest]) -> None:
        self.seen.extend(tuple(bytes(i) for i in r.images if isinstance(i, bytes)) for r in reqs)

    def score_each(self, reqs: Sequence[ScoreRequest]) -> list[Coroutine[Any, Any, LetterScores | Failure]]:
        self._keep(reqs)
        return super().score_each(reqs)

    def generate_each(self, reqs: Sequence[GenerateRequest]) -> list[Coroutine[Any, Any, Generation | Failure]]:
        self._keep(reqs)
        return super().generate_each(reqs)


RULES = [{"match": "Question:", "letters": {"A": -0.5, "B": -1.5}}, {"match": "", "reply": "ok"}]


def _data_url(data: bytes, mime: str = "video/mp4") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def _body(url: str, text: str = "what happens?", **extra: Any) -> dict[str, Any]:
    content = [{"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": text}]
    return {"model": "vlm", "messages": [{"role": "user", "content": content}], "max_tokens": 4, **extra}


def _message(status: int, answer: dict[str, Any]) -> str:
    assert status == 400, answer
    assert answer["error"]["type"] == "BadRequestError" and answer["error"]["code"] == 400
    message = str(answer["error"]["message"])
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("clips")
    make_test_video(folder / "long.mp4", 50, fps=10, width=96, height=64)
    make_test_video(folder / "short.mp4", 5, fps=10, width=96, height=64)
    return folder


def test_sample_indices_are_vllms_linspace() -> None:
    for total, n in [(50, 8), (100, 32), (33, 32), (7, 3), (1000, 1), (64, 7)]:
        assert sample_indices(total, n) == np.linspace(0, total - 1, n, dtype=int).tolist()
    assert sample_indices(5, 32) == [0, 1, 2, 3, 4]  # a clip with fewer frames: every frame once
    assert sample_indices(32, 32) == list(range(32))


def test_a_data_url_clip_reaches_the_engine_as_its_frames_in_order(clips: Path) -> None:
    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm", media=MediaOptions.make(num_frames=8))) as url:
        status, answer = post_chat(url, _body(_data_url((clips / "long.mp4").read_bytes())))
        assert status == 200 and answer["choices"][0]["message"]["content"] == "ok", answer
        # Scoring requests carry the frames the same way.
        score = _body(_data_url((clips / "short.mp4").read_bytes()), "Question: which?", max_tokens=1,
                      logprobs=True, top_logprobs=2, continue_final_message=True, add_generation_prompt=False)
        score["messages"].append({"role": "assistant", "content": "Answer:"})
        status, answer = post_chat(url, score)
        assert status == 200 and answer["choices"][0]["logprobs"]["content"][0]["token"] == "A", answer
    long, short = engine.seen
    assert [read_frame_index(f) for f in long] == [0, 7, 14, 21, 28, 35, 42, 49]
    assert [read_frame_index(f) for f in short] == [0, 1, 2, 3, 4]


def test_the_default_keeps_vllms_32_frames(clips: Path) -> None:
    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm")) as url:
        status, answer = post_chat(url, _body(_data_url((clips / "long.mp4").read_bytes())))
    assert status == 200, answer
    [frames] = engine.seen
    assert [read_frame_index(f) for f in frames] == np.linspace(0, 49, 32, dtype=int).tolist()


def test_bad_video_parts_are_one_line_400s(clips: Path, tmp_path: Path) -> None:
    mp4 = (clips / "long.mp4").read_bytes()
    audio_only = tmp_path / "tone.m4a"
    _write_audio(audio_only)
    cases = {
        "data:video/mp4;base64,@@not-base64@@": "video part 0: invalid base64 data",
        _data_url(b"this is no video at all"): "video part 0 (23 bytes): not a readable video",
        _data_url(mp4[: len(mp4) // 3]): "not a readable video",
        _data_url(audio_only.read_bytes()): "not a readable video (no video stream)",
        _data_url(mp4, "image/png"): "video part 0: a data URL must have a video MIME type",
        "data:video/mp4," + mp4[:10].hex(): "video part 0: the data URL must be base64-encoded",
        "data:video/mp4;base64,": "video part 0: the data URL holds no data",
        "https://example.com/clip.mp4": "video part 0: benchcheck serve never fetches from the network",
        "http://127.0.0.1:1/clip.mp4": "never fetches from the network",
        "ftp://example.com/clip.mp4": "video part 0: unsupported URL scheme 'ftp'",
        (clips / "long.mp4").as_uri(): "video part 0: cannot load local files without `--allowed-local-media-path`",
    }
    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm")) as url:
        for video_url, needle in cases.items():
            message = _message(*post_chat(url, _body(video_url)))
            assert needle in message, (video_url[:40], message)
        image = {"type": "image_url", "image_url": {"url": _data_url(b"x", "image/png")}}
        video = {"type": "video_url", "video_url": {"url": _data_url(mp4)}}
        text = {"type": "text", "text": "q"}
        for content, needle in [
            ([video, video, text], "part 1: one video part is supported"),
            ([video, text, video], "video parts must come before the text part"),
            ([{"type": "video_url", "video_url": "data:video/mp4;base64,AAAA"}, text],
             "video part 0: 'video_url' must be an object"),
        ]:
            message = _message(*post_chat(url, {"messages": [{"role": "user", "content": content}]}))
            assert needle in message, message
        png = _png()
        image = {"type": "image_url", "image_url": {"url": _data_url(png, "image/png")}}
        message = _message(*post_chat(url, {"messages": [{"role": "user", "content": [image, video, text]}]}))
        assert "a video part cannot be combined with image parts" in message
        # The server still answers after all of them.
        assert post_chat(url, _body(_data_url(mp4)))[0] == 200
    assert len(engine.seen) == 1  # no refused request reached the engine


def _png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, "PNG")
    return buf.getvalue()


def _write_audio(path: Path) -> None:
    """An m4a with an AAC track and no video stream."""
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=16000)
        samples = np.zeros((1, 1024), dtype=np.float32)
        for k in range(8):
            frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, k * 1024
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A media folder with a clip, a symlink to a clip inside it, and a symlink to one outside."""
    root = tmp_path_factory.mktemp("media")
    outside = tmp_path_factory.mktemp("private")
    media = root / "media"
    make_test_video(media / "sub" / "clip.mp4", 20, fps=10, width=96, height=64)
    make_test_video(outside / "secret.mp4", 20, fps=10, width=96, height=64)
    (media / "inner_link.mp4").symlink_to(media / "sub" / "clip.mp4")
    (media / "escape.mp4").symlink_to(outside / "secret.mp4")
    (media / "escape_dir").symlink_to(outside)
    (media / "notes.txt").write_text("not a clip")
    return media


@pytest.fixture(scope="module")
def media_server(allowed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    rules = tmp_path_factory.mktemp("rules") / "rules.json"
    rules.write_text(json.dumps([{"match": "", "images": {"count_min": 4, "count_max": 4}, "reply": "four frames"},
                                 {"match": "", "reply": "other"}]))
    with cli_server("--engine", "scripted", "--rules", str(rules), "--model", "vlm",
                    "--allowed-local-media-path", str(allowed), "--video-num-frames", "4") as (url, _):
        yield url


def test_file_urls_inside_the_allowed_folder_are_read(allowed: Path, media_server: str) -> None:
    for path in (allowed / "sub" / "clip.mp4", allowed / "inner_link.mp4",
                 allowed / "sub" / ".." / "sub" / "clip.mp4"):
        status, answer = post_chat(media_server, _body("file://" + str(path)))
        assert status == 200 and answer["choices"][0]["message"]["content"] == "four frames", (path, answer)
    # A data URL on the same server: --video-num-frames applies to it too.
    status, answer = post_chat(media_server, _body(_data_url((allowed / "sub" / "clip.mp4").read_bytes())))
    assert status == 200 and answer["choices"][0]["message"]["content"] == "four frames", answer


def test_file_urls_escaping_the_allowed_folder_are_refused(allowed: Path, media_server: str) -> None:
    outside = "must be inside `--allowed-local-media-path`"
    cases = {
        "file://" + str(allowed / ".." / "escape.mp4"): outside,
        "file://" + str(allowed / "sub" / ".." / ".." / "media_other.mp4"): outside,
        "file://" + str(allowed / "escape.mp4"): outside,  # a symlink out of the folder
        "file://" + str(allowed / "escape_dir" / "secret.mp4"): outside,  # through a linked folder
        "file://" + str(allowed): outside,  # the folder itself is no file inside it
        "file:///etc/passwd": outside,
        "file://" + str(allowed / "missing.mp4"): "cannot read",
        "file://" + str(allowed / "sub"): "cannot read",
        "file://" + str(allowed / "notes.txt"): "not a readable video",
        "file://" + str(allowed / "sub" / "clip.mp4") + "%00.mp4": "the file path is not usable",
    }
    for video_url, needle in cases.items():
        message = _message(*post_chat(media_server, _body(video_url)))
        assert needle in message, (video_url, message)
        assert str(allowed.parent) not in message.replace(video_url[len("file://"):], "")  # the folder is not told


def test_the_allowed_folder_must_be_a_folder(allowed: Path) -> None:
    from click.testing import CliRunner

    from benchcheck.cli import main

    for bad in (str(allowed / "notes.txt"), str(allowed / "nowhere"), ""):
        result = CliRunner().invoke(main, ["serve", "--engine", "scripted", "--model", "x",
                                           "--allowed-local-media-path", bad])
        assert result.exit_code == 2 and "--allowed-local-media-path" in result.output, result.output
    result = CliRunner().invoke(main, ["serve", "--engine", "scripted", "--model", "x", "--video-num-frames", "0"])
    assert result.exit_code == 2 and "--video-num-frames" in result.output


def test_a_clip_slower_to_decode_than_its_limit_is_a_400_that_stops_the_decode(
        clips: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within both caps a clip of large frames can still take minutes to decode: past
    ``--video-decode-timeout`` the decode stops before its next packet and the request is a
    400 that says so; the server goes on serving."""
    import re

    from benchcheck.serve import media

    fast = media._to_jpeg

    def slow(frame: Any) -> bytes:
        time.sleep(0.4)
        return fast(frame)

    monkeypatch.setattr(media, "_to_jpeg", slow)
    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm", media=MediaOptions.make(num_frames=8, decode_timeout_s=1.0))) as url:
        message = _message(*post_chat(url, _body(_data_url((clips / "long.mp4").read_bytes()))))
        text_only = {"model": "vlm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        assert post_chat(url, text_only)[0] == 200
    found = re.search(r"video part 0 \(\d+ bytes\): its frames took over 1 s to decode "
                      r"\(--video-decode-timeout; (\d+) of 50 packets decoded\)", message)
    assert found, message
    assert 0 < int(found[1]) < 50  # stopped inside the clip, not at its end
    assert engine.seen == [()]  # the text request only


def test_the_decode_timeout_must_be_positive() -> None:
    from click.testing import CliRunner

    from benchcheck.cli import main
    from benchcheck.serve import media

    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="video decode timeout"):
            MediaOptions.make(decode_timeout_s=bad)
    for bad in ("0", "-2", "nan"):
        result = CliRunner().invoke(main, ["serve", "--engine", "scripted", "--model", "x",
                                           "--video-decode-timeout", bad])
        assert result.exit_code == 2 and "--video-decode-timeout" in result.output, result.output
    defaults = {p.name: p.default for p in main.commands["serve"].params}
    assert defaults["video_decode_timeout"] == media.DEFAULT_DECODE_TIMEOUT_S
    assert defaults["video_num_frames"] == media.DEFAULT_NUM_FRAMES


def test_a_local_file_over_the_body_limit_is_refused_unread(allowed: Path) -> None:
    from benchcheck.serve.chat import RequestError, VideoPart
    from benchcheck.serve.media import load_video

    part = VideoPart(0, path=str(allowed / "sub" / "clip.mp4"))
    size = (allowed / "sub" / "clip.mp4").stat().st_size
    with pytest.raises(RequestError, match=f"is over {size - 1} bytes"):
        load_video(part, MediaOptions.make(4, allowed), size - 1)
    assert len(load_video(part, MediaOptions.make(4, allowed), size)) == 4


def test_hf_answers_a_clip_as_the_same_frames_sent_as_image_parts(tiny_model: Path, clips: Path) -> None:
    """On the hf engine (tiny checkpoint, CPU) a video_url part scores exactly as its frames sent
    as image_url parts: the video reaches the engine the way images do."""
    from benchcheck.serve.media import decode_frames

    mp4 = (clips / "long.mp4").read_bytes()
    frames = decode_frames(mp4, 4)
    images = [{"type": "image_url", "image_url": {"url": _data_url(f, "image/jpeg")}} for f in frames]
    video = [{"type": "video_url", "video_url": {"url": _data_url(mp4)}}]

    def score(parts: list[dict[str, Any]]) -> dict[str, Any]:
        content = [*parts, {"type": "text", "text": "Question: what? A. x B. y"}]
        status, answer = post_chat(url, {
            "messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "Answer:"}],
            "max_tokens": 1, "logprobs": True, "top_logprobs": 5, "continue_final_message": True,
            "add_generation_prompt": False}, timeout_s=120)
        assert status == 200, answer
        return answer

    with cli_server("--model", str(tiny_model), "--device", "cpu", "--video-num-frames", "4") as (url, _):
        by_video, by_images = score(video), score(images)
    assert by_video["usage"] == by_images["usage"]
    assert by_video["choices"][0]["logprobs"] == by_images["choices"][0]["logprobs"]


def _mjpeg_clip(sizes: Sequence[tuple[int, int]]) -> bytes:
    """A Matroska MJPEG clip whose stream declares the first frame's size and whose frames have
    ``sizes``, in order (the MJPEG decoder takes each frame's own size)."""
    import io
    from fractions import Fraction

    import av

    def jpeg(w: int, h: int) -> bytes:
        enc = av.CodecContext.create("mjpeg", "w")
        enc.width, enc.height, enc.pix_fmt, enc.time_base = w, h, "yuvj420p", Fraction(1, 25)
        frame = av.VideoFrame(w, h, "yuvj420p")
        for plane in frame.planes:
            plane.update(bytes(plane.buffer_size))
        frame.pts = 0
        return bytes([*enc.encode(frame), *enc.encode(None)][0])

    buf = io.BytesIO()
    with av.open(buf, "w", format="matroska") as out:
        stream = out.add_stream("mjpeg", rate=25)
        stream.width, stream.height = sizes[0]
        stream.pix_fmt, stream.time_base = "yuvj420p", Fraction(1, 25)
        for k, (w, h) in enumerate(sizes):
            packet = av.Packet(jpeg(w, h))
            packet.pts = packet.dts = k
            packet.time_base, packet.stream, packet.is_keyframe = stream.time_base, stream, True
            out.mux(packet)
    return buf.getvalue()


def test_a_frame_over_the_pixel_cap_is_refused_when_the_stream_declared_a_small_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream's declared size is checked before decoding, but a later frame may be larger:
    each decoded frame is checked too, before it is converted."""
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 64 * 64 * 2)
    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm", media=MediaOptions.make(num_frames=4))) as url:
        assert post_chat(url, _body(_data_url(_mjpeg_clip([(64, 64)] * 4))))[0] == 200
        message = _message(*post_chat(url, _body(_data_url(_mjpeg_clip([(64, 64)] * 2 + [(256, 256)] * 2)))))
    assert "not a readable video (frames of 256x256 are over 8192 pixels)" in message
    assert len(engine.seen) == 1


def test_a_clip_of_more_packets_than_the_cap_is_refused(clips: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every demuxed packet is held in memory, at a cost far above a tiny packet's size in the
    file: a clip over ``MAX_VIDEO_PACKETS`` is a 400 before the rest is read."""
    from benchcheck.serve import media

    monkeypatch.setattr(media, "MAX_VIDEO_PACKETS", 20)
    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm", media=MediaOptions.make(num_frames=4))) as url:
        message = _message(*post_chat(url, _body(_data_url((clips / "long.mp4").read_bytes()))))
        assert "not a readable video (the video stream has over 20 packets)" in message
        assert post_chat(url, _body(_data_url((clips / "short.mp4").read_bytes())))[0] == 200
    assert len(engine.seen) == 1


class CountingEngine(RecordingEngine):
    """A recording engine with a context length that counts prompt tokens (as the hf engine
    does): a generation without ``max_tokens`` has its prompt counted on a thread."""

    max_model_len = 4096

    def count_tokens(self, req: GenerateRequest) -> int:
        return 10


def test_slow_clips_do_not_hold_the_threads_other_requests_need(
        clips: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More clips than the loop's default executor has threads, all decoding slowly, leave a
    text request's token count free to run; at most ``VIDEO_DECODE_THREADS`` decode at once."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from benchcheck.serve import app as serve_app
    from benchcheck.serve.media import VIDEO_DECODE_THREADS, load_video

    release, lock = threading.Event(), threading.Lock()
    running, most = 0, 0

    def slow_load(*args: Any) -> tuple[bytes, ...]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(30)
        with lock:
            running -= 1
        return load_video(*args)

    monkeypatch.setattr(serve_app, "load_video", slow_load)
    engine = CountingEngine(RULES)
    clip = _body(_data_url((clips / "short.mp4").read_bytes()))
    text = {"model": "vlm", "messages": [{"role": "user", "content": "hi"}]}
    with thread_server(build_app(engine, "vlm")) as url, ThreadPoolExecutor(40) as pool:
        videos = [pool.submit(post_chat, url, clip, None, 60.0) for _ in range(40)]
        try:
            status, answer = post_chat(url, text, timeout_s=10)
            assert status == 200 and answer["choices"][0]["message"]["content"] == "ok", answer
        finally:
            release.set()
        assert [v.result()[0] for v in videos] == [200] * 40
    assert most <= VIDEO_DECODE_THREADS


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race a local user who can write in the allowed folder could win: a folder on the
    path is replaced by a symlink out of the allowed folder after the realpath check and before
    the open. The open walks the path from the allowed folder without following symlinks, so
    the file outside is never read."""
    media, outside = tmp_path / "media", tmp_path / "outside"
    make_test_video(media / "sub" / "clip.mp4", 20, fps=10, width=96, height=64)
    make_test_video(outside / "clip.mp4", 20, fps=10, width=96, height=64)
    target = str(media / "sub" / "clip.mp4")
    realpath = os.path.realpath

    def racing_realpath(path: Any, *args: Any, **kwargs: Any) -> Any:
        real = realpath(path, *args, **kwargs)
        if path == target:
            (media / "sub").rename(media / "sub_moved")
            (media / "sub").symlink_to(outside)
        return real

    engine = RecordingEngine(RULES)
    with thread_server(build_app(engine, "vlm", media=MediaOptions.make(4, media))) as url:
        assert post_chat(url, _body("file://" + target))[0] == 200  # before the race
        monkeypatch.setattr(os.path, "realpath", racing_realpath)
        message = _message(*post_chat(url, _body("file://" + target)))
    assert f"video part 0: cannot read {target!r}: " in message  # ENOTDIR: a symlink is no folder
    assert len(engine.seen) == 1
