"""``launch``'s servers get no key that is not theirs. A real ``launch`` whose "vLLM" is a script
that records its environment and then runs a real ``benchcheck serve`` (the reference engine):
with ``BENCHCHECK_API_KEY`` in the user's shell the server used to demand a key its clients never
send (every row a 401), and the judge's and other keys reached every server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopback import free_port

FAKE_VLLM = '''import os, sys
a = sys.argv[1:]
port, name = a[a.index("--port") + 1], a[a.index("--served-model-name") + 1]
open(os.environ["FAKE_VLLM_ENV"], "w").write("\\n".join(sorted(os.environ)))
os.execv(sys.executable, [sys.executable, "-m", "benchcheck", "serve", "--engine", "reference", "--model", "rules",
                          "--served-model-name", name, "--host", "127.0.0.1", "--port", port])
'''
SECRETS = {"BENCHCHECK_API_KEY": "servekey-ABCdef-123456", "OPENAI_API_KEY": "sk-openai-4242xx",
           "EVAL_LLM_JUDGE_API_KEY": "judgeKEY-99999999"}
HUB = {"HF_TOKEN": "hf_abcdefghijklmnopqrstuv"}


def test_launch_servers_get_only_the_hub_token_and_answer_their_clients(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.path.abspath("src"), **SECRETS, **HUB,
           "FAKE_VLLM_ENV": str(tmp_path / "server_env.txt")}
    items = tmp_path / "items"
    subprocess.run([sys.executable, "-m", "benchcheck", "demo", "items", "--out", str(items)], env=env, check=True,
                   capture_output=True, timeout=120)
    (tmp_path / "fake_vllm.py").write_text(FAKE_VLLM)
    vllm = tmp_path / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "fake_vllm.py"} "$@"\n')
    vllm.chmod(0o755)
    res = subprocess.run([sys.executable, "-m", "benchcheck", "launch", "--step", "1", "--gpus", "1", "--server",
                          "vllm", "--vllm", str(vllm), "--model", "rules", "--served-model-name", "reference:rules",
                          "--port0", str(free_port()), "--logs", str(tmp_path / "logs"), "--items", str(items),
                          "--results", str(tmp_path / "results")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    seen = set((tmp_path / "server_env.txt").read_text().split())
    assert "HF_TOKEN" in seen and not set(SECRETS) & seen
    rows = [json.loads(x) for f in (tmp_path / "results" / "step1").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert rows and all(r["status"] != "error" for r in rows), {r.get("error") for r in rows}
