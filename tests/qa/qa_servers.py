"""Real loopback servers and CLI runs for the QA tests.

- ``serve_cli``: ``benchcheck serve`` in its own process (the scripted judge or VLM).
- ``RecordingHost``: an aiohttp app on a thread that records every request (method, path,
  headers, body) and answers ``/v1/models`` and ``/v1/chat/completions`` like a judge or a VLM.
- ``run_cli``: ``benchcheck ...`` as a subprocess with a chosen environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from loopback import serve_cli

FAKE_VLM = Path(__file__).with_name("fake_vlm.py")
CLIP_FRAMES = 60  # frames of each test clip


@contextmanager
def scripted_server(tmp: Path, name: str, rules: list[dict[str, Any]]) -> Iterator[str]:
    """The scripted engine behind ``benchcheck serve``, reporting ``scripted:<name>``."""
    path = tmp / f"rules_{name}.json"
    path.write_text(json.dumps(rules))
    with serve_cli("--engine", "scripted", "--rules", str(path), "--model", name,
                   "--served-model-name", name) as url:
        yield url


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Reply = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


@dataclass
class RecordingHost:
    """Records every request; ``reply`` maps a chat body to (status, JSON answer)."""

    model_id: str
    reply: Reply
    requests: list[Recorded] = field(default_factory=list)
    redirect_to: str | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(Recorded(request.method, request.path, dict(request.headers), body))
        if self.redirect_to is not None:
            raise web.HTTPTemporaryRedirect(self.redirect_to + request.path)
        if request.method == "GET" and request.path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": self.model_id, "object": "model"}]})
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            status, answer = self.reply(json.loads(body))
            return web.json_response(answer, status=status)
        return web.json_response({"error": {"message": "not found"}}, status=404)

    def chats(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.requests if r.path.endswith("/chat/completions")]


def completion(model: str, text: str) -> dict[str, Any]:
    """A chat completion body as an OpenAI-compatible server answers it."""
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def repeat_grader(model: str) -> Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]:
    """A judge, reporting ``model``, that gives 1 when the candidate repeats the reference, else 0."""
    def grade(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prompt = body["messages"][-1]["content"][-1]["text"]
        ref = re.search(r"Reference answer: (.*)", prompt)
        cand = re.search(r"Candidate answer: (.*)", prompt)
        same = ref is not None and cand is not None and ref.group(1).strip() == cand.group(1).strip()
        return 200, completion(model, json.dumps({"score": 1 if same else 0, "reasoning": "Compared."}))
    return grade



@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float


def run_cli(args: list[str], env: dict[str, str], timeout_s: float = 120.0) -> CliResult:
    """``benchcheck ARGS`` in a subprocess with exactly ``env`` (plus PATH, HOME, LANG, PYTHONPATH)."""
    full = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "PYTHONPATH") if k in os.environ}
    full.update(env)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", "from benchcheck.cli import main; main()", *args],
                          capture_output=True, text=True, env=full, timeout=timeout_s)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def vlm_cmd() -> str:
    """The ``--vlm-cmd`` template of the fake VLM."""
    return f"{sys.executable} {FAKE_VLM} --video {{video}} --question {{question}} --frames {{num_frames}}"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def qa_entry(iid: str, question: str, ground_truth: Any = "yes", video: str = "a.mp4",
             methods: list[str] | None = None) -> dict[str, Any]:
    return {"id": iid, "query": question, "ground_truth": ground_truth,
            "evaluation_method": ["qa"] if methods is None else methods, "video": video}


def pipe_holders(*pipes: Any) -> str:
    """Which other processes hold the pipes of these file objects open (this one holds their read
    ends), with state and command line: what a test that timed out on a killed child's output says."""
    names = {f"pipe:[{os.fstat(p.fileno()).st_ino}]" for p in pipes}
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in names for fd in os.listdir(f"/proc/{pid}/fd")):
                state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[:2]
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"pid {pid} (state {state[0]}, ppid {state[1]}): {cmd[:200]}")
        except OSError:
            continue
    return "; ".join(found) or "no process"


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
