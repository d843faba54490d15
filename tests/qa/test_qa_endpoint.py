"""The VLM as an OpenAI-compatible endpoint: frames, video URL, inline clip; scripted servers."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from qa_servers import (
    CLIP_FRAMES,
    RecordingHost,
    completion,
    qa_entry,
    read_json,
    run_cli,
    scripted_server,
    serve_cli,
)

from benchcheck.testing.tiny import build_tiny_model
from benchcheck.video.plans import uniform_grid
from benchcheck.video.synth import read_frame_index
from loopback import thread_server


def _vlm_reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    text = body["messages"][-1]["content"][-1]["text"]
    return 200, completion("cosmos-reason-served", "yes" if "car" in text else "no")


def _run(dataset: Path, clips: Path, out: Path, url: str, *extra: str, env: dict[str, str] | None = None) -> Any:
    return run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                    "--vlm-endpoint", url, "--vlm-model", "cosmos", "--skip-judge", *extra], env or {})


def test_frames_are_time_uniform_images(tmp_path: Path, clips: Path,
                                        write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry("a", "Is there a car?"), qa_entry("b", "Is it night?", video="sub/b.mp4")])
    host = RecordingHost("cosmos", _vlm_reply)
    with thread_server(host.app()) as url:
        res = _run(dataset, clips, tmp_path / "out", url, "--num-frames", "6", "--max-side", "160",
                   env={"VLM_KEY": "vlm-key-1234567"})
        res_key = _run(dataset, clips, tmp_path / "out2", url, "--vlm-api-key-env", "VLM_KEY", "--limit", "1",
                       "--num-frames", "6", "--max-side", "160",
                       env={"VLM_KEY": "vlm-key-1234567", "NGC_API_KEY": "ngc-key-1234567"})
    assert res.returncode == 0 and res_key.returncode == 0, res.stderr + res_key.stderr
    chats = host.chats()
    assert [c["model"] for c in chats[:2]] == ["cosmos", "cosmos"]
    for chat in chats:
        parts = chat["messages"][-1]["content"]
        assert [p["type"] for p in parts] == ["image_url"] * 6 + ["text"]
        images = [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])))
                  for p in parts[:-1]]
        assert all(max(im.size) == 160 for im in images)
        assert [read_frame_index(im) for im in images] == uniform_grid([k / 4 for k in range(CLIP_FRAMES)], 6)
        assert chat["temperature"] == 0.0
    assert "Authorization" not in host.requests[0].headers
    assert host.requests[-1].headers["Authorization"] == "Bearer vlm-key-1234567"
    assert "ngc-key-1234567" not in str(host.requests[-1].headers) + host.requests[-1].body.decode()
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["model_served"] == "cosmos-reason-served"
    assert [w["generated_answer"] for w in read_json(tmp_path / "out" / "workflow_output.json")] == ["yes", "no"]
    lat = read_json(tmp_path / "out" / "latency_summary.json")
    assert all(r["prep_s"] > 0 for r in lat["items"])


def test_video_url_and_inline_modes(tmp_path: Path, clips: Path,
                                    write_dataset: Callable[[list[Any]], Path]) -> None:
    big = clips / "big.mp4"
    big.write_bytes(b"\0" * (11 * 1024 * 1024))
    try:
        dataset = write_dataset([qa_entry("a", "Is there a car?", video="sub/b.mp4"),
                                 qa_entry("big", "Big?", video="big.mp4")])
        host = RecordingHost("cosmos", _vlm_reply)
        with thread_server(host.app()) as url:
            by_url = _run(dataset, clips, tmp_path / "u", url, "--video-url-base", "http://10.0.0.5:7777/clips/",
                          "--limit", "1")
            inline = _run(dataset, clips, tmp_path / "i", url, "--inline-media")
    finally:
        big.unlink()
    assert by_url.returncode == 0 and inline.returncode == 0, by_url.stderr + inline.stderr
    chats = host.chats()
    part = chats[0]["messages"][-1]["content"][0]
    assert part == {"type": "video_url", "video_url": {"url": "http://10.0.0.5:7777/clips/sub/b.mp4"}}
    inline_url = chats[1]["messages"][-1]["content"][0]["video_url"]["url"]
    assert inline_url.startswith("data:video/mp4;base64,")
    assert base64.b64decode(inline_url.split(",", 1)[1]) == (clips / "sub" / "b.mp4").read_bytes()
    assert "warning: big: big.mp4 is 11.0 MB inline" in inline.stderr
    assert "warning" not in by_url.stderr
    assert read_json(tmp_path / "i" / "summary.json")["settings"]["media"] == "inline"


def test_scripted_vlm_server_timeout_is_an_error(tmp_path: Path, clips: Path,
                                                 write_dataset: Callable[[list[Any]], Path]) -> None:
    """``benchcheck serve`` with the scripted engine as the VLM; a hung request ends at --timeout."""
    rules = [{"match": "hang", "delay_s": 30.0}, {"match": "car", "reply": "yes"},
             {"match": "boom", "error": {"status": 500, "message": "engine died"}}, {"match": "", "reply": "no"}]
    dataset = write_dataset([qa_entry("a", "Is there a car?"), qa_entry("h", "Does it hang?"),
                             qa_entry("e", "boom?")])
    out = tmp_path / "out"
    with scripted_server(tmp_path, "cosmos", rules) as url:
        res = _run(dataset, clips, out, url, "--timeout", "1", "--watchdog-grace", "1", "--num-frames", "2",
                   "--max-side", "64")
    assert res.returncode == 3
    summary = read_json(out / "summary.json")
    assert summary["model_served"] == "scripted:cosmos"
    assert summary["vlm_errors_by_kind"] == {"http": 1, "timeout": 1}
    errors = {e["id"]: e["error"] for e in summary["errors"]}
    assert "engine died" in errors["e"] and "1 s" in errors["h"]
    lat = read_json(out / "latency_summary.json")
    assert next(r for r in lat["items"] if r["id"] == "h")["latency_s"] < 5
    assert summary["latency_s"]["n"] == 1


@pytest.mark.parametrize("flags", [["--inline-media", "--video-url-base", "http://h/x"],
                                   ["--video-url-base", "file:///x"]])
def test_conflicting_media_flags_exit_2(tmp_path: Path, clips: Path, write_dataset: Callable[[list[Any]], Path],
                                        flags: list[str]) -> None:
    dataset = write_dataset([qa_entry("a", "q")])
    res = _run(dataset, clips, tmp_path / "o", "http://127.0.0.1:9", *flags)
    assert res.returncode == 2 and res.stderr.startswith("error:")


def test_tiny_model_served_as_the_vlm(tmp_path: Path, clips: Path,
                                      write_dataset: Callable[[list[Any]], Path]) -> None:
    """A real (random-weight) Qwen3-VL behind ``benchcheck serve``, judged by a scripted judge."""
    model = build_tiny_model(tmp_path / "tiny")
    dataset = write_dataset([qa_entry("a", "Is there a car?"), qa_entry("b", "How many?", "3", "sub/b.mp4")])
    judge_rules = [{"match": "Candidate answer:", "reply": "Unrelated to the reference.\nSCORE: 0"}]
    out = tmp_path / "out"
    with serve_cli("--model", str(model), "--device", "cpu", "--served-model-name", "tiny-vlm") as vlm_url, \
            scripted_server(tmp_path, "judge-x", judge_rules) as judge_url:
        res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                       "--vlm-endpoint", vlm_url, "--vlm-model", "tiny-vlm", "--num-frames", "4",
                       "--max-side", "128", "--max-tokens", "8"],
                      {"EVAL_LLM_JUDGE_BASE_URL": judge_url, "EVAL_LLM_JUDGE_NAME": "judge-x"})
    assert res.returncode == 0, res.stderr
    summary = read_json(out / "summary.json")
    assert summary["model_served"] == "tiny-vlm" and summary["judge_model"] == "scripted:judge-x"
    assert summary["counts"]["scored"] == 2 and summary["accuracy"] == 0.0
    assert all(w["generated_answer"] for w in read_json(out / "workflow_output.json"))


def test_endpoint_latency_is_the_whole_item(tmp_path: Path, clips: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frame decoding counts in the latency, as everything counts in command mode; prep_s shows it alone."""
    import asyncio
    import time

    from benchcheck.masking import Masker
    from benchcheck.qa.dataset import QAItem
    from benchcheck.qa.vlm_endpoint import EndpointVLM

    real_media = EndpointVLM._media

    def slow_media(self: EndpointVLM, item: QAItem) -> Any:
        time.sleep(0.4)  # a slow decoder
        return real_media(self, item)

    monkeypatch.setattr(EndpointVLM, "_media", slow_media)
    host = RecordingHost("cosmos", _vlm_reply)
    item = QAItem("a", "Is there a car?", "yes", "a.mp4", clips / "a.mp4", ("qa",))

    async def ask(url: str) -> Any:
        vlm = EndpointVLM(url + "/v1", "cosmos", num_frames=2, timeout_s=30, watchdog_grace_s=5,
                          redactor=Masker([]), max_side=64)
        try:
            t0 = time.monotonic()
            ans = await vlm.answer(item)
            return ans, time.monotonic() - t0
        finally:
            await vlm.aclose()

    with thread_server(host.app()) as url:
        ans, wall = asyncio.run(ask(url))
    assert ans.status == "ok" and ans.answer == "yes"
    assert ans.latency_s > ans.prep_s >= 0.4
    assert ans.latency_s <= wall


def test_endpoint_failures_are_the_openai_engines_kinds(tmp_path: Path, clips: Path,
                                                        write_dataset: Callable[[list[Any]], Path]) -> None:
    """QA's endpoint VLM goes through the openai engine: a 400 naming the context limit is
    context_too_long, a 200 that is not a chat completion is bad_output, a 429 is not retried
    (no retries around the VLM call), in frames and video-URL modes alike."""
    def reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        text = body["messages"][-1]["content"][-1]["text"].lower()
        if "long" in text:
            return 400, {"error": {"message": "This model's maximum context length is 32768 tokens", "code": 400}}
        if "odd" in text:
            return 200, {"unexpected": True}
        if "busy" in text:
            return 429, {"error": {"message": "slow down", "code": 429}}
        return 200, completion("cosmos", "yes")

    dataset = write_dataset([qa_entry("long", "Too long?"), qa_entry("odd", "Odd?"), qa_entry("busy", "Busy?"),
                             qa_entry("ok", "Fine?")])
    host = RecordingHost("cosmos", reply)
    with thread_server(host.app()) as url:
        frames = _run(dataset, clips, tmp_path / "f", url, "--num-frames", "2", "--max-side", "64")
        by_url = _run(dataset, clips, tmp_path / "u", url, "--video-url-base", "http://10.0.0.5:7777/clips")
    for res, out in ((frames, tmp_path / "f"), (by_url, tmp_path / "u")):
        assert res.returncode == 3, res.stderr
        summary = read_json(out / "summary.json")
        assert summary["vlm_errors_by_kind"] == {"bad_output": 1, "context_too_long": 1, "http": 1}
        assert summary["counts"]["unjudged"] == 1
    busy = [c for c in host.chats() if "Busy?" in c["messages"][-1]["content"][-1]["text"]]
    assert len(busy) == 2  # once per run: never retried
    assert host.chats()[-1]["messages"][-1]["content"][0]["type"] == "video_url"
