"""Every benchmark script runs, as the module the package makes it (``python -m benchmarks.NAME``),
at its smallest size on the CPU, and says why where it needs a GPU. In process (``runpy``): the
suite pays no interpreter or torch start per script. The cheap ones run in the normal suite; the
ones that build a model, start servers or decode videos are slow (BENCHCHECK_SLOW=1). CPU seconds
of each, measured on the 2-core dev VM: decision 070."""

from __future__ import annotations

import contextlib
import io
import os
import pkgutil
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import benchmarks

ROOT = Path(__file__).resolve().parents[2]

# script -> (arguments of its smallest run; "{tmp}" is the test's folder, what its output must
# hold, slow?). A script whose run needs CUDA is listed with what it says without one.
RUNS: dict[str, tuple[list[str], str, bool]] = {
    "audit_speed": (["--items", "200", "--rounds", "5"], "", False),
    "audit_calibration": (["--quick", "--seeds", "1"], "claimed flip", True),
    "audit_validity": (["--quick", "--seeds", "1", "--only", "coverage"], "| golds |", True),
    "audit_validity_edges": (["--quick"], "| options | items per benchmark |", True),
    "batch_padding": ([], "padding", True),
    "blas_threads": (["--calls", "200", "--hogs", "0"], "| BLAS threads |", False),
    "client_throughput": (["--text", "20", "--frames", "2", "--rounds", "1", "--concurrency", "4", "--threads", "2"],
                          "", True),
    "cudnn_plans": (["--tiny", "--modes", "cudnn,ragged", "--profile", "--out", "{tmp}"],
                    "ragged  lm [1, 180]: largest difference to cudnn", True),
    "data_io": (["--shard-mib", "1", "--videos", "2", "--repeat", "1", "--result-rows", "100", "--dir", "{tmp}"],
                "", True),
    "decode_attention": (["--tiny", "--grid", "--tunings", "128/8/2@2048", "--out", "{tmp}"], "rows 5 keys 512", False),
    "decode_overlap": (["--tiny", "--out", "{tmp}"], "| one stream |", True),
    "decode_step": (["--tiny", "--rows", "1,2", "--tunings", "128/8/2", "--out", "{tmp}"], "rows 2: ", True),
    "dedup": (["--n", "200", "--limit-sample", "100"], "", True),
    # Also run in the normal suite by tests/benchmarks/test_device_reads.py, on the session's tiny model.
    "device_reads": (["--config", "ops=+visual_no_reads", "--out", "{tmp}"],
                     "| ops=+visual_no_reads | blind | **all** |", True),
    "engine_throughput": (["--tiny", "--quick", "--no-naive", "--out", "{tmp}"], "| workload |", True),
    "frame_sharing": (["--per-video", "1,2"], "frames shared", True),
    "frames": (["--tiny", "--repeats", "1", "--workdir", "{tmp}"], "frames per second per core", True),
    "gemm_clock": ([], "needs a CUDA device", False),
    "gpu_pool": (["--tiny", "--items", "24", "--work", "{tmp}/work", "--out", "{tmp}"], "| 6 v32_8b |", True),
    "gpu_screen": (["--tiny", "--only", "blind,video32,sweep,e2e", "--variants", "", "--out", "{tmp}"],
                   "| check |", True),
    "lm_kernels": ([], "needs a CUDA device", False),
    "long_prefill": (["--tiny", "--parts", "kernels,vision,padded", "--out", "{tmp}"], "padded: ", True),
    "lock_probe": (["--threads", "1"], "", True),
    "pack_logs": (["--mib", "1"], "mask_stream", False),
    "pipeline_timeline": (["--tiny", "--out", "{tmp}"], "", True),
    "probe_rates": (["--seeds", "2", "--items", "40", "--permutations", "9"], "", True),
    "probe_scale": (["--items", "2000", "--benches", "2", "--permutations", "3", "--sample", "50", "--no-minilm"],
                    "", True),
    "qa_cmd_cleanup": (["--calls", "2", "--repeats", "1"], "new runner", False),
    "qa_harness": (["--calls", "2", "--frames", "30", "--pick", "4", "--judge-items", "5"], "", True),
    "ray_executor": (["--rounds", "1", "--tiny-items", "2", "--sweep-items", "1"], "", True),
    "report_scale": (["--items", "300", "--benches", "3", "--out", "{tmp}/r", "--workers", "1"], "", True),
    "screen_build": (["--videos", "4", "--repeats", "1", "--work", "{tmp}/work", "--out", "{tmp}"],
                     "| 3 v32_2b |", False),
    "screen_calls": (["--tiny", "--runs", "2:8:2,3:12:2:+visual_no_reads", "--limit", "8", "--work", "{tmp}/work",
                      "--out", "{tmp}"], "| 3 v32_2b | 12 | 2 | +visual_no_reads |", True),
    "vision_gemm": (["--tiny", "--rounds", "1", "--out", "{tmp}"], "largest letter log-prob difference", True),
    "sweep_build": (["--videos", "30:16x9:2", "--chunk", "2", "--cond", "v_fps0.5_s224", "--repeats", "1",
                     "--workdir", "{tmp}/w", "--out", "{tmp}"], "| ours |", True),
    "sweep_decode": (["--minutes", "0.05", "--procs", "1", "--opencv-frames", "5", "--workdir", "{tmp}"], "", True),
    "sweep_local": (["--rounds", "1", "--sweep-items", "1"], "", True),
    "sweep_mix": (["--tiny", "--videos", "30:16x9:1", "--rounds", "1", "--conds", "v_blind,v_1,v_8_s224,v_fps0.5_s224",
                   "--answer-stop", "3", "--workdir", "{tmp}/w", "--out", "{tmp}"], "(mean new tokens 3.0)", True),
    "sweep_validity": (["--runs", "1", "--power-runs", "1", "--n-perm", "50"], "", True),
    "sweep_validity_edges": (["--runs", "5"], "| video sizes |", False),
    "sweep_margin_skew": (["--runs", "3"], "| video sizes |", False),
    "rare_rate_interval": (["--runs", "5", "--only", "rare"], "cells below 0.93", False),
    "paired_difference_interval": (["--part", "skew", "--skew-runs", "3", "--check", "3"], "| cell | rule |", False),
    "varlen_probe": ([], "needs a CUDA device", False),
    "sweep_unsynced": (["--items", "20", "--rounds", "1"], "unsynced", False),
    "export_memory": (["--items", "200", "--dir", "{tmp}"], '"export_peak_mib"', False),
    "video_ingest": (["--frames", "30", "--repeats", "1", "--work", "{tmp}/w", "--out", "{tmp}"], "| clip.mpg |", True),
    "vision_inputs": (["--repeats", "1", "--out", "{tmp}"], "| 2B call |", False),
    "vision_rotary": (["--smoke", "--out", "{tmp}"], "", True),
}
NEEDS = {"vision_rotary": "triton", "ray_executor": "ray", "dedup": "sentence_transformers"}  # else skipped
LIBRARIES = {"gpu_e2e"}  # imported by gpu_screen (its e2e workload), no command of its own


def test_every_script_has_a_smoke_run() -> None:
    scripts = {m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.ispkg}
    assert scripts - LIBRARIES == set(RUNS), "add the new script's smallest run to RUNS"


@contextlib.contextmanager
def argv(args: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = args
    try:
        yield
    finally:
        sys.argv = saved


def run_module(name: str, args: list[str]) -> tuple[int, str]:
    """``python -m benchmarks.NAME ARGS`` in this process: (exit code, stdout + the exit message)."""
    out = io.StringIO()
    code = 0
    with argv([f"benchmarks.{name}", *args]), contextlib.redirect_stdout(out):
        try:
            runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
            if isinstance(e.code, str):
                out.write(e.code)
    return code, out.getvalue()


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if RUNS[n][2] else [])
                                  for n in sorted(RUNS)])
def test_smoke(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args, says, _ = RUNS[name]
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    # Children (data_io's, Ray's workers) import this tree's benchcheck and benchmarks, whatever
    # the working folder: absolute paths first.
    here = [str(ROOT / "src"), str(ROOT)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*here, os.environ.get("PYTHONPATH", "")]))
    code, text = run_module(name, [a.replace("{tmp}", str(tmp_path)) for a in args])
    if says.startswith("needs a CUDA"):
        pytest.importorskip("torch")
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device: the script's own run is the GPU's")
        assert code != 0 and says in text and "\n" not in text.strip(), text
        return
    assert code == 0, text[-2000:]
    assert says in text, text[-2000:]
