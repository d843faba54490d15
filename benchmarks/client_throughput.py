"""Client throughput: can one client process keep a GPU busy?

Starts ``benchcheck serve --engine scripted`` (answers cost ~nothing, so the numbers are the
HTTP path's) on loopback and drives it, in the same run, with

- ``openai``: the ``openai`` engine (aiohttp, keep-alive, one process, one event loop);
- ``requests.post + threads``: the origin's client (seed 002 ``logprob_request``: one
  ``requests.post`` per forward, a new connection each time) on a thread pool;
- ``requests.Session + threads``: the same with one keep-alive session per thread;
- ``HTTP floor``: the limit of the HTTP stack itself here: an aiohttp client posting ready-made
  bodies of the same size to a bare aiohttp server that reads them and replays a recorded answer
  (no body building, no parsing, no engine).

Two workloads: text-only scoring requests (step 1) and requests carrying 32 real 448x256 JPEG
frames at q85 (steps 3/5/6). Client and server share this machine's cores; the CPU seconds each
used per request are reported (robust to other load on the machine, unlike req/s), so the
bottleneck is visible. Clients run interleaved for ``--rounds`` rounds
(the machine is shared and noisy) and the median is reported. Prints a Markdown table;
``--json`` writes every row.

    python benchmarks/client_throughput.py --text 4000 --frames 400 --rounds 3 --json /tmp/client.json
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from PIL import Image

from benchcheck.engines.base import Failure, ScoreRequest
from benchcheck.engines.openai.client import OpenAIEngine
from benchcheck.engines.openai.wire import score_payload
from benchcheck.protocol import ASSISTANT_PREFIX, TOP_LOGPROBS

RULES = [{"match": "", "letters": {"A": -0.3, "B": -1.8, "C": -2.9, "D": -4.0}}]
PROMPT = (
    "Carefully watch the video and pick the option that best answers the question.\n\nQuestion: What does the "
    "person in the red jacket do right after opening the door?\nOptions:\nA. sits down\nB. waves to the camera\n"
    "C. picks up a box\nD. closes the window\nAnswer with the option letter only."
)


@dataclass
class Row:
    workload: str
    client: str
    requests: int
    failures: int
    wall_s: float
    req_per_s: float
    client_cpu_s: float
    server_cpu_s: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def frames_448x256(n: int) -> list[bytes]:
    """Real JPEGs (q85) with texture, so their size is that of video frames, not of flat colour."""
    out = []
    for i in range(n):
        im = Image.effect_mandelbrot((448, 256), (-2.0 + i * 0.01, -1.0, 1.0, 1.0), 60).convert("RGB")
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(label: str, workload: str, n: int, server_pid: int, fn: Callable[[], int]) -> Row:
    c0, s0, t0 = self_cpu_s(), proc_cpu_s(server_pid), time.perf_counter()
    failures = fn()
    wall = time.perf_counter() - t0
    row = Row(
        workload,
        label,
        n,
        failures,
        round(wall, 3),
        round(n / wall, 1),
        round(self_cpu_s() - c0, 4),
        round(proc_cpu_s(server_pid) - s0, 4),
    )
    print(f"  {workload:10s} {label:30s} {row.req_per_s:8.1f} req/s  failures={failures}", file=sys.stderr)
    return row


def run_ours(url: str, reqs: list[ScoreRequest], concurrency: int) -> int:
    async def go() -> int:
        engine = OpenAIEngine([url], "bench", concurrency=concurrency)
        try:
            res = await engine.score(reqs)
        finally:
            await engine.aclose()
        return sum(isinstance(r, Failure) for r in res)

    return asyncio.run(go())


def origin_body(prompt: str, images: tuple[bytes, ...]) -> dict[str, Any]:
    """Seed 002's body, built the way it builds it (base64 strings of the frames)."""
    content: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(b).decode()}}
        for b in images
    ]
    content.append({"type": "text", "text": prompt})
    return {
        "model": "bench",
        "temperature": 0.0,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
        "messages": [{"role": "user", "content": content}, {"role": "assistant", "content": ASSISTANT_PREFIX}],
        "continue_final_message": True,
        "add_generation_prompt": False,
    }


def run_requests(url: str, reqs: list[ScoreRequest], threads: int, session: bool) -> int:
    import requests

    local = threading.local()

    def one(r: ScoreRequest) -> bool:
        body = origin_body(r.prompt, tuple(i for i in r.images if isinstance(i, bytes)))
        post = requests.post
        if session:
            if not hasattr(local, "s"):
                local.s = requests.Session()
            post = local.s.post
        try:
            resp = post(f"{url}/v1/chat/completions", json=body, timeout=(10, 600))
            resp.raise_for_status()
            return bool(resp.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"])
        except (requests.RequestException, KeyError, IndexError, ValueError):
            return False

    with ThreadPoolExecutor(threads) as pool:
        return sum(not ok for ok in pool.map(one, reqs))


def wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"{url}: server did not become healthy")


def spawn(args: list[str]) -> tuple[str, subprocess.Popen[bytes]]:
    """``python ARGS --port <free>`` in its own process group, once healthy."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *args, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    return url, proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# The HTTP floor: a bare aiohttp server that reads the body and replays a recorded answer.
FLOOR_SERVER = """
import sys
from aiohttp import web
answer = open(sys.argv[1], "rb").read()
async def chat(request):
    await request.read()
    return web.Response(body=answer, content_type="application/json")
async def health(request):
    return web.Response()
app = web.Application(client_max_size=1 << 30)
app.router.add_post("/v1/chat/completions", chat)
app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[3]), print=None, access_log=None)
"""


def run_floor(url: str, payload: bytes, n: int, concurrency: int) -> int:
    """Ready-made bodies posted by an aiohttp client: the HTTP stack's own cost, nothing else."""
    import aiohttp

    async def go() -> int:
        gate = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def one() -> bool:
                async with gate, session.post(url + "/v1/chat/completions", data=payload) as r:
                    await r.read()
                    return r.status == 200

            return sum(not ok for ok in await asyncio.gather(*(one() for _ in range(n))))

    return asyncio.run(go())


def recorded_answer(url: str) -> bytes:
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        score_payload("bench", ScoreRequest("a", PROMPT)),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return bytes(r.read())


def median_row(rows: list[Row]) -> Row:
    rows = sorted(rows, key=lambda r: r.req_per_s)
    return rows[len(rows) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", type=int, default=4000, help="text-only requests per client and round")
    ap.add_argument("--frames", type=int, default=400, help="32-frame requests per client and round")
    ap.add_argument("--concurrency", type=int, default=64, help="openai engine: requests in flight")
    ap.add_argument("--threads", type=int, default=32, help="requests clients: worker threads (origin: 32)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (clients interleaved); the median is reported")
    ap.add_argument("--json", type=Path, default=None, help="write all rows here")
    args = ap.parse_args()

    frames = tuple(frames_448x256(32))
    workloads = {
        "text": [ScoreRequest(f"t{i}", f"{PROMPT} [{i}]") for i in range(args.text)],
        "32 frames": [ScoreRequest(f"f{i}", f"{PROMPT} [{i}]", frames) for i in range(args.frames)],
    }
    body_mb = len(score_payload("bench", workloads["32 frames"][0])) / 1e6
    print(f"32-frame request body: {body_mb:.2f} MB; frame ~{sum(map(len, frames)) / 32 / 1e3:.1f} kB", file=sys.stderr)

    load_before = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    rows: list[Row] = []
    c, t = args.concurrency, args.threads
    with tempfile.TemporaryDirectory() as tmp:
        rules, answer = Path(tmp) / "rules.json", Path(tmp) / "answer.json"
        rules.write_text(json.dumps(RULES))
        url, server = spawn(
            [
                "-c",
                "from benchcheck.cli import main; main()",
                "serve",
                "--engine",
                "scripted",
                "--rules",
                str(rules),
                "--model",
                "bench",
                "--max-batch-size",
                "256",
            ]
        )
        try:
            run_ours(url, workloads["text"][:200], c)  # warm-up (imports, connections)
            answer.write_bytes(recorded_answer(url))
            for _ in range(args.rounds):
                for name, reqs in workloads.items():
                    clients: list[tuple[str, Callable[[], int]]] = [
                        (f"openai engine (c={c})", partial(run_ours, url, reqs, c)),
                        (f"requests.post + {t} threads", partial(run_requests, url, reqs, t, False)),
                        (f"requests.Session + {t} threads", partial(run_requests, url, reqs, t, True)),
                    ]
                    for label, fn in clients:
                        rows.append(measure(label, name, len(reqs), server.pid, fn))
        finally:
            stop(server)
        floor_url, floor = spawn(["-c", FLOOR_SERVER, str(answer)])
        try:
            for _ in range(args.rounds):
                for name, reqs in workloads.items():
                    fn = partial(run_floor, floor_url, score_payload("bench", reqs[0]), len(reqs), c)
                    rows.append(measure(f"HTTP floor (c={c})", name, len(reqs), floor.pid, fn))
        finally:
            stop(floor)

    print(
        f"\nMachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; client and server on the same cores; "
        f"median of {args.rounds} rounds; load average before the run: {load_before}.\n"
    )
    print(
        "| workload | client | requests | failures | req/s (median) | req/s range "
        "| client CPU ms/req | server CPU ms/req |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in workloads:
        for label in dict.fromkeys(r.client for r in rows):
            mine = [r for r in rows if r.workload == name and r.client == label]
            m = median_row(mine)
            lo, hi = min(r.req_per_s for r in mine), max(r.req_per_s for r in mine)
            print(
                f"| {name} | {label} | {m.requests} | {sum(r.failures for r in mine)} | {m.req_per_s} | "
                f"{lo}-{hi} | {1e3 * m.client_cpu_s / m.requests:.2f} | {1e3 * m.server_cpu_s / m.requests:.2f} |"
            )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
