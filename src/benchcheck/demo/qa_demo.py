"""The demo's QA run: `benchcheck qa run` against the reference engine behind `benchcheck serve`,
scored by the scripted judge (1 when the candidate names the reference's option letter, else 0).

Both servers are real loopback processes on ports the kernel picks, started and stopped here; the judge's
settings reach `qa run` only through the EVAL_LLM_JUDGE_* variables, as in production.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic
from benchcheck.demo.benchmarks import DemoItem
from benchcheck.launch.servers import AUTO_PORT, Running, ServerSpec, start, stop, wait_healthy
from benchcheck.protocol import LETTERS, build_prompt
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS

QA_PER_KIND = 2
QA_FRAMES = 32
JUDGE_NAME = "scripted:demo-judge"
VLM_LABEL = "demo-vlm"
# The scripted judge: the candidate's letter equals the reference letter (a regex backreference).
JUDGE_RULES = [
    {"match": r"Reference answer: ([A-Z])\nCandidate answer: (?:Answer: ?)?\1\b",
     "reply": "The candidate names the reference option.\nSCORE: 1"},
    {"match": "", "reply": "The candidate names another option.\nSCORE: 0"},
]


def qa_dataset(items: Sequence[DemoItem], per_kind: int = QA_PER_KIND) -> list[dict[str, Any]]:
    """A few items of each kind as a VSS-format QA dataset (the question in the protocol's prompt)."""
    taken: dict[str, int] = {}
    out = []
    intro = INTROS[DEFAULT_INTRO].frames
    for it in items:
        if it.kind in ("duplicate", "mislabelled", "longest") or taken.get(it.kind, 0) >= per_kind:
            continue
        taken[it.kind] = taken.get(it.kind, 0) + 1
        out.append({"id": it.item_id, "query": build_prompt(intro, it.question, it.options),
                    "ground_truth": LETTERS[it.answer], "evaluation_method": ["qa"],
                    "video": f"scene_{it.scene:02d}.mp4"})
    return out


def _serve(index: int, args: Sequence[str], logs: Path) -> Running:
    """A server on a port the kernel picks as it binds (no free-port probe that another process
    can take before the bind); ``wait_healthy`` reads the port from its log line."""
    argv = (sys.executable, "-m", "benchcheck", "serve", *args, "--port", str(AUTO_PORT))
    return start(ServerSpec(index, AUTO_PORT, argv, reports_port=True), logs / f"serve_{index}.log")


def run_qa_demo(out: Path, items: Sequence[DemoItem]) -> dict[str, Any]:
    """Run the QA benchmark under ``out/qa``; returns its summary.json plus the exit code."""
    qa = out / "qa"
    qa.mkdir(parents=True, exist_ok=True)
    write_json_atomic(qa / "dataset.json", qa_dataset(items), indent=1)
    write_json_atomic(qa / "judge_rules.json", JUDGE_RULES, indent=1)
    servers = [_serve(0, ["--engine", "reference", "--model", VLM_LABEL], qa / "logs"),
               _serve(1, ["--engine", "scripted", "--model", JUDGE_NAME, "--rules", str(qa / "judge_rules.json")],
                      qa / "logs")]
    try:
        wait_healthy(servers, 120)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_LLM_JUDGE_")}
        env.update({"EVAL_LLM_JUDGE_BASE_URL": servers[1].spec.url, "EVAL_LLM_JUDGE_NAME": JUDGE_NAME})
        cmd = [sys.executable, "-m", "benchcheck", "qa", "run", "--dataset", str(qa / "dataset.json"),
               "--videos", str(out / "videos"), "--output-dir", str(qa / "run"),
               "--vlm-endpoint", servers[0].spec.url, "--vlm-model", f"reference:{VLM_LABEL}",
               "--num-frames", str(QA_FRAMES), "--max-side", "896", "--max-tokens", "16", "--timeout", "120"]
        with (qa / "logs" / "qa_run.log").open("ab") as log:
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    finally:
        stop([s.proc for s in servers])
    summary_path = qa / "run" / "summary.json"
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    summary["exit_code"] = rc
    summary["output_dir"] = str(qa / "run")
    return summary
