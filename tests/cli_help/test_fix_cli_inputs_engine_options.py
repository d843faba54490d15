"""--hf-config (the hf engine's) and --rules (the scripted engine's) given with another engine are
refused in one line naming the option and the engine, exit 2: they used to be dropped without a
word (``--engine openai --hf-config ops=-swiglu`` ran as if the knob were set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcheck.engines.options import EngineOptionError, EngineOptions
from benchcheck.engines.registry import from_options

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("engopts")
    assert _run(d, "demo", "items", "--out", "items").returncode == 0
    (d / "rules.json").write_text(json.dumps([{"match": "", "letters": {"A": -0.1, "B": -3.0}}]), encoding="utf-8")
    return d


def _refused(r: subprocess.CompletedProcess[str], option: str, engine: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0] and \
        f"--engine {engine}" in lines[0], r.stderr


SCREEN = ("screen", "--items", "items", "--step", "1", "--results", "res", "--no-progress", "--limit", "2")


@pytest.mark.parametrize(("extra", "option", "engine"), [
    (["--engine", "openai", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--hf-config", "ops=-swiglu"],
     "--hf-config", "openai"),
    (["--engine", "reference", "--hf-config", "max_batch_size=8", "--plan-only"], "--hf-config", "reference"),
    (["--engine", "reference", "--rules", "rules.json"], "--rules", "reference"),
    (["--engine", "scripted", "--rules", "rules.json", "--hf-config", "ops=-swiglu"], "--hf-config", "scripted"),
    (["--engine", "reference", "--letter-tokenizer", "items"], "--letter-tokenizer", "reference"),
])
def test_screen_refuses_an_option_its_engine_does_not_read(ws: Path, extra: list[str], option: str,
                                                           engine: str) -> None:
    _refused(_run(ws, *SCREEN, *extra), option, engine)
    assert not (ws / "res").exists()


def test_sweep_run_and_serve_refuse_it_too(ws: Path) -> None:
    _refused(_run(ws, "sweep", "run", "--items", "items", "--results", "sw", "--engine", "reference",
                  "--conds", "v_blind", "--hf-config", "ops=-swiglu", "--no-progress"), "--hf-config", "reference")
    assert not (ws / "sw").exists()
    _refused(_run(ws, "serve", "--engine", "reference", "--model", "x", "--port", "0", "--hf-config",
                  "ops=-swiglu"), "--hf-config", "reference")
    _refused(_run(ws, "serve", "--engine", "hf", "--model", "x", "--port", "0", "--rules", "rules.json"),
             "--rules", "hf")


def test_every_engine_built_from_options_refuses_it() -> None:
    """The registry's rule, so a job file or a Ray actor's recipe meets it as well as the CLI."""
    with pytest.raises(EngineOptionError, match="--hf-config has no meaning with --engine openai"):
        from_options("openai", EngineOptions(model="m", endpoints=("http://127.0.0.1:9/v1",),
                                             hf_config=("ops=-swiglu",)))


def test_the_engine_that_reads_it_still_runs(ws: Path) -> None:
    r = _run(ws, "screen", "--items", "items", "--step", "1", "--results", "ok", "--no-progress", "--limit", "2",
             "--engine", "scripted", "--rules", "rules.json")
    assert r.returncode == 0, r.stderr
    assert list((ws / "ok" / "step1").glob("*.jsonl"))
