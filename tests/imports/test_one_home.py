"""Issue 39: one home for each constant. The pinned models, the intros and the run defaults are
written once, in ``benchcheck.defaults``; screening, the sweep, launch and dedup read that module, and
the protocol docs state the same values."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from benchcheck import defaults
from benchcheck.data.launch import EXPECTED
from benchcheck.dedup.model import DEFAULT_MODEL, DEFAULT_REVISION
from benchcheck.launch.servers import ServerOptions
from benchcheck.launch.slurm import SlurmJob, render_sbatch
from benchcheck.launch.sweep_servers import SweepLaunch
from benchcheck.screen.engine_args import DEFAULT_WORKERS
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS, MODELS, STEPS
from benchcheck.sweep.conditions import SWEEP_MODEL, condition_specs
from benchcheck.sweep.engine import DEFAULT_WORKERS_PER_ENDPOINT

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "benchcheck"
PINNED = (defaults.QWEN3_VL_8B.revision, defaults.QWEN3_VL_2B.revision, defaults.DEDUP_REVISION)
INTRO_TEXTS = (defaults.INTRO_BLIND, defaults.INTRO_OPTIONS_ONLY, defaults.INTRO_FRAMES)


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module except docstrings, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


def test_no_other_source_file_writes_a_pinned_value() -> None:
    # A second copy of a revision or an intro is how two copies drifted apart before; a revision's
    # prefix is enough to find one (docstrings may name it shortened, code may not hold it).
    needles = [r[:8] for r in PINNED] + list(INTRO_TEXTS)
    found = [f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}"
             for path in sorted(SRC.rglob("*.py")) if path != SRC / "defaults.py"
             for line, text in _code_strings(path)
             if text == defaults.INTRO_NAME or any(n in text for n in needles)]
    assert not found, "\n".join(found)


def test_screening_the_sweep_launch_and_dedup_read_the_one_home() -> None:
    assert MODELS == {"8b": defaults.QWEN3_VL_8B, "2b": defaults.QWEN3_VL_2B}
    assert SWEEP_MODEL is defaults.QWEN3_VL_8B
    assert DEFAULT_INTRO == defaults.INTRO_NAME
    intro = INTROS[DEFAULT_INTRO]
    assert (intro.blind, intro.options_only, intro.frames) == INTRO_TEXTS
    # The sweep's prompts use the same sentences as the steps' (step 6 and v_32 see the same video).
    specs = condition_specs(["v_blind", "v_32"])  # condition name -> RunSpec
    six = STEPS[6].run_spec(intro, MODELS["8b"])
    assert specs["v_32"].prompt.intro == six.prompt.intro == defaults.INTRO_FRAMES
    assert specs["v_blind"].prompt.intro == defaults.INTRO_BLIND
    assert specs["v_32"].prompt.intro_name == six.prompt.intro_name == defaults.INTRO_NAME
    assert specs["v_32"].model == six.model == defaults.QWEN3_VL_8B
    assert DEFAULT_WORKERS == defaults.STEP_WORKERS
    assert DEFAULT_WORKERS_PER_ENDPOINT == defaults.SWEEP_WORKERS_PER_ENDPOINT
    assert (DEFAULT_MODEL, DEFAULT_REVISION) == (defaults.DEDUP_MODEL, defaults.DEDUP_REVISION)


def test_the_launchers_and_the_pack_report_use_the_same_server_settings() -> None:
    opts = ServerOptions(model="m", served_name="m", revision=None)
    assert (opts.port0, opts.gpu_util, opts.max_num_seqs) == (defaults.STEP_PORT0, defaults.GPU_UTIL,
                                                             defaults.STEP_MAX_SEQS)
    sweep = SweepLaunch(n_servers=1, gpus=(), model="m", served_name="m", revision=None, use_vllm=True,
                        max_num_seqs=defaults.SWEEP_MAX_SEQS, sweep_args=(), logs=Path("logs"))
    assert (sweep.port0, sweep.gpu_util, sweep.workers_per_gpu) == (defaults.SWEEP_PORT0, defaults.GPU_UTIL,
                                                                    defaults.SWEEP_WORKERS_PER_ENDPOINT)
    assert EXPECTED["pool"]["--gpu-memory-utilization"] == "0.85"  # the flag text the launch lines carry
    assert EXPECTED["pool:step1"]["--max-num-seqs"] == str(defaults.STEP_MAX_SEQS)
    assert EXPECTED["sweep"]["--max-model-len"] == str(defaults.SWEEP_MAX_MODEL_LEN)
    script = render_sbatch(SlurmJob(step=1, array=2, gpus_per_task=4, args=("--items", "i.jsonl")))
    assert "--port0 auto " in script  # each server a port of its own, not one from a range
    script = render_sbatch(SlurmJob(step=1, array=2, gpus_per_task=4, args=("--items", "i.jsonl"),
                                    port0=defaults.STEP_PORT0))
    assert f"--port0 $(({defaults.STEP_PORT0} + 4 *" in script


def test_the_protocol_docs_state_the_same_values() -> None:
    for doc in (ROOT / "docs" / "PROTOCOL.md", SRC / "docs" / "PROTOCOL.md"):
        text = doc.read_text(encoding="utf-8")
        for ref in (defaults.QWEN3_VL_8B, defaults.QWEN3_VL_2B):
            assert f"`{ref.name}`" in text and f"`{ref.revision}`" in text, (doc, ref)
        assert f"`{defaults.INTRO_NAME}`" in text, doc
        launcher = re.search(r"ports (\d+)\+i, `--gpu-memory-utilization\s+([\d.]+)`, `--max-num-seqs (\d+)`", text)
        assert launcher, doc
        assert (int(launcher[1]), float(launcher[2]), int(launcher[3])) == (defaults.STEP_PORT0, defaults.GPU_UTIL,
                                                                           defaults.STEP_MAX_SEQS), doc
    dedup = (ROOT / "docs" / "dedup.md").read_text(encoding="utf-8")
    assert defaults.DEDUP_REVISION in dedup and defaults.DEDUP_MODEL in dedup
